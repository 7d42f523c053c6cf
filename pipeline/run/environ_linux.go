package run

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gpuattest/gpuattest/pipeline"
)

// scrubEnviron overwrites the values of the signing secrets in this
// process's initial environment block, the memory /proc/PID/environ
// reads. Unsetenv only drops a variable from the copy Go keeps, so a host
// step (whose parent gpuattest is) could otherwise read the key password
// from /proc/$PPID/environ. The block is found through /proc/self/stat
// (env_start, env_end) and written through /proc/self/mem; each value
// becomes asterisks of its length.
func scrubEnviron() error {
	start, end, err := environBounds()
	if err != nil {
		return err
	}
	block, err := os.ReadFile("/proc/self/environ")
	if err != nil {
		return err
	}
	if uint64(len(block)) > end-start {
		return fmt.Errorf("/proc/self/environ is %d bytes, more than env_end - env_start (%d)", len(block), end-start)
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	off := 0
	for _, kv := range bytes.Split(block, []byte{0}) {
		k, v, ok := bytes.Cut(kv, []byte("="))
		if ok && len(v) > 0 && pipeline.SigningSecret(string(k)) {
			at := int64(start) + int64(off+len(k)+1)
			if _, err := mem.WriteAt(bytes.Repeat([]byte("*"), len(v)), at); err != nil {
				return fmt.Errorf("overwriting %s in the environment block: %w", k, err)
			}
		}
		off += len(kv) + 1
	}
	return nil
}

// environBounds reads env_start and env_end (fields 50 and 51) of
// /proc/self/stat.
func environBounds() (start, end uint64, err error) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, err
	}
	// Fields after the command name, which may hold spaces, start at 3.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, errors.New("/proc/self/stat: no command name")
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 49 {
		return 0, 0, fmt.Errorf("/proc/self/stat: %d fields, want 51", len(fields)+2)
	}
	if start, err = strconv.ParseUint(fields[47], 10, 64); err == nil {
		end, err = strconv.ParseUint(fields[48], 10, 64)
	}
	return start, end, err
}
