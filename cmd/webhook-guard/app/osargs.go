package app

import "os"

type osArgs struct{}

// Args0 is the invoked program name.
func (osArgs) Args0() string {
	if len(os.Args) == 0 {
		return ""
	}
	return os.Args[0]
}
