//go:build amd64 && !race

package memcopy

import "golang.org/x/sys/cpu"

var haveRep = cpu.X86.HasERMS
