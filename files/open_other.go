//go:build !unix

package files

import "io/fs"

// nonBlock: elsewhere than on Unix there is no O_NONBLOCK to open with.
const nonBlock = 0

// fileID: elsewhere than on Unix a file's identity and links are not read
// (an approval is bound to the content only).
func fileID(fs.FileInfo) (string, uint64) { return "", 1 }
