//go:build !linux

package process

import (
	"errors"
	"os"
)

// memoryFile is not available: requestFile uses a temporary file.
func memoryFile([]byte) (*os.File, error) { return nil, errors.ErrUnsupported }
