//go:build !unix

package files

// nonBlock: elsewhere than on Unix there is no O_NONBLOCK to open with.
const nonBlock = 0
