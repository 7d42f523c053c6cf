package lazyregexp

import (
	"slices"
	"strings"
	"testing"
)

func TestRegexp(t *testing.T) {
	t.Parallel()
	re := New(`sm_([0-9]+)`)
	if re.re != nil {
		t.Fatal("compiled before its first use")
	}
	if !re.MatchString("sm_90") || re.MatchString("compute") {
		t.Error("MatchString")
	}
	if got := re.FindStringSubmatch("x sm_80 y"); !slices.Equal(got, []string{"sm_80", "80"}) {
		t.Errorf("FindStringSubmatch = %q", got)
	}
	if got := re.FindAllStringSubmatch("sm_80 sm_90", -1); len(got) != 2 || got[1][1] != "90" {
		t.Errorf("FindAllStringSubmatch = %q", got)
	}
	if re.String() != `sm_([0-9]+)` {
		t.Errorf("String = %q", re.String())
	}
}

// TestRegexpPanicsOnFirstUse: a bad expression panics where it is first
// used, as regexp.MustCompile would have in init.
func TestRegexpPanicsOnFirstUse(t *testing.T) {
	t.Parallel()
	re := New(`(`)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "missing closing )") {
			t.Errorf("recovered %v", r)
		}
	}()
	re.MatchString("x")
}
