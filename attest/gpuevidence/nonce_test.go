package gpuevidence

import (
	"testing"
)

// TestNonces pins the derivations (a node and a verifier built apart
// must agree on them; the wanted values were computed with Python's
// hashlib from the documented encoding) and checks that each input
// changes the nonce.
func TestNonces(t *testing.T) {
	t.Parallel()
	d := "sha256:" + "ab"
	tests := []struct {
		name string
		got  Nonce
		want string
	}{
		{"fleet", FleetNonce(d, "job-1", ""), "a9b953b1f211030b73fd2637dedf90bd42c97507294e8f67f90a292451f236e7"},
		{"fleet per GPU", FleetNonce(d, "job-1", "GPU-1"), "a9c0490ae2b420b0c2dc933c32b2edab8ebe11dc8bf83049ebadeeceb641104e"},
		{"run", RunNonce("run-1", []string{"sha256:b", "sha256:a"}), "f3a0e2b72d93e14e3ab9d1f6d59d4a4cca7ae56b715be1add7fec98c4159417c"},
	}
	seen := map[Nonce]string{}
	for _, tc := range tests {
		if tc.want != "" && tc.got.String() != tc.want {
			t.Errorf("%s = %s, want %s", tc.name, tc.got, tc.want)
		}
		if other, dup := seen[tc.got]; dup {
			t.Errorf("%s and %s give the same nonce", tc.name, other)
		}
		seen[tc.got] = tc.name
	}
	distinct := []Nonce{
		FleetNonce(d, "job-1", ""), FleetNonce(d, "job-2", ""), FleetNonce("sha256:ac", "job-1", ""),
		FleetNonce(d, "job-1", "GPU-2"), FleetNonce(d+"job", "-1", ""), FleetNonce(d, "", "job-1"),
		RunNonce("run-1", nil), RunNonce("run-2", nil), RunNonce("run-1", []string{"sha256:a"}),
		RunNonce("run-1sha256:a", nil),
	}
	m := map[Nonce]int{}
	for i, n := range distinct {
		if j, dup := m[n]; dup {
			t.Errorf("inputs %d and %d give the same nonce %s", j, i, n)
		}
		m[n] = i
	}
	if RunNonce("r", []string{"sha256:b", "sha256:a", "sha256:a"}) != RunNonce("r", []string{"sha256:a", "sha256:b"}) {
		t.Error("RunNonce depends on the order or repetition of the digests")
	}
}
