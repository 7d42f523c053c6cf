package envlist

import "testing"

func TestLookup(t *testing.T) {
	t.Parallel()
	env := []string{"A=1", "B=", "NOEQUALS", "A=2", "C=x=y"}
	for _, tt := range []struct {
		key, want string
		ok        bool
	}{
		{"A", "2", true}, // the last entry wins
		{"B", "", true},
		{"C", "x=y", true},
		{"NOEQUALS", "", false},
		{"D", "", false},
	} {
		got, ok := Lookup(env, tt.key)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Lookup(%q) = %q, %v; want %q, %v", tt.key, got, ok, tt.want, tt.ok)
		}
		if g2, ok2 := Func(env)(tt.key); g2 != got || ok2 != ok {
			t.Errorf("Func(env)(%q) = %q, %v; Lookup says %q, %v", tt.key, g2, ok2, got, ok)
		}
	}
}
