//go:build !linux

package tools

import (
	"errors"
	"os"
)

// memoryFile is not available: requestFile uses a temporary file.
func memoryFile([]byte) (*os.File, error) { return nil, errors.ErrUnsupported }
