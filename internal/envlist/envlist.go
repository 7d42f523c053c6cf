// Package envlist reads environment lists in os/exec's form: KEY=VALUE
// entries, where a later entry for a key overrides an earlier one.
package envlist

import "strings"

// Lookup returns the value of key in env and whether it is set. When env
// holds key more than once, the last entry wins, as it does for a process
// started with that list.
func Lookup(env []string, key string) (string, bool) {
	v, ok := "", false
	for _, kv := range env {
		if k, val, found := strings.Cut(kv, "="); found && k == key {
			v, ok = val, true
		}
	}
	return v, ok
}

// Func returns a lookup function over env, in os.LookupEnv's shape.
func Func(env []string) func(string) (string, bool) {
	return func(key string) (string, bool) { return Lookup(env, key) }
}
