//go:build !unix

package regfile

import "os"

const openFlags = os.O_RDONLY
