package run

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDropSigningSecretsScrubsEnviron: found by bench/adversarial. A host
// step read the key password from /proc/$PPID/environ, which Unsetenv
// leaves as it was; DropSigningSecrets overwrites the values there. The
// test binary runs itself with secrets in its initial environment.
func TestDropSigningSecretsScrubsEnviron(t *testing.T) {
	if os.Getenv("GPUATTEST_TEST_SCRUB") == "1" {
		if err := DropSigningSecrets(); err != nil {
			os.Stdout.WriteString("error: " + err.Error())
			os.Exit(1)
		}
		out, err := exec.Command("sh", "-c", `tr '\0' '\n' < /proc/$PPID/environ; echo "child: [$GPUATTEST_PASSWORD]"`).Output()
		if err != nil {
			os.Stdout.WriteString("error: " + err.Error())
			os.Exit(1)
		}
		os.Stdout.Write(out)
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDropSigningSecretsScrubsEnviron$")
	cmd.Env = append(os.Environ(), "GPUATTEST_TEST_SCRUB=1", "GPUATTEST_PASSWORD=hunter2-secret",
		"SIGSTORE_ID_TOKEN=eyJ.token", "ACTIONS_ID_TOKEN_REQUEST_TOKEN=ghs-req", "OTHER_VAR=kept")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	env := string(out)
	for _, secret := range []string{"hunter2-secret", "eyJ.token", "ghs-req"} {
		if strings.Contains(env, secret) {
			t.Errorf("/proc/PID/environ still holds %q:\n%s", secret, env)
		}
	}
	for _, want := range []string{"OTHER_VAR=kept\n", "GPUATTEST_PASSWORD=**************\n", "child: []"} {
		if !strings.Contains(env, want) {
			t.Errorf("want %q in:\n%s", want, env)
		}
	}
}
