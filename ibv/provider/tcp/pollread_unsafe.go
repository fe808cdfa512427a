package tcp

import "unsafe"

// read reads into b (unix.Read's results, without its entersyscall for small buffers).
func (p *pollReader) read(fd uintptr) (int, error) {
	if len(p.b) == 0 {
		return 0, nil
	}
	n, e := sysRead(fd, unsafe.Pointer(&p.b[0]), len(p.b))
	if e != 0 {
		return -1, e
	}
	return n, nil
}
