package run

import "testing"

func TestCIRunURL(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"none", nil, ""},
		{"github", map[string]string{"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "42"}, "https://github.com/o/r/actions/runs/42"},
		{"gitlab", map[string]string{"CI_JOB_URL": "https://gitlab.com/o/r/-/jobs/7"}, "https://gitlab.com/o/r/-/jobs/7"},
		{"not http", map[string]string{"CI_JOB_URL": "file:///etc/passwd"}, ""},
		{"credentials", map[string]string{"CI_JOB_URL": "https://u:p@gitlab.com/x"}, ""},
	}
	for _, tt := range tests {
		if got := ciRunURL(func(k string) string { return tt.env[k] }); got != tt.want {
			t.Errorf("%s: ciRunURL = %q, want %q", tt.name, got, tt.want)
		}
	}
}
