package tcp

import "unsafe"

// prependLocked puts the unwritten rest of a directly written frame before the queued frames
// (mu held). A rest of the frame head (it lives in c.head) is always copied, a payload is kept by
// reference when ref allows.
func (c *conn) prependLocked(rest [][]byte, ref bool) {
	var pieces [2][]byte
	np := 0
	for _, b := range rest {
		if len(b) == 0 {
			continue
		}
		inHead := uintptr(unsafe.Pointer(&b[0]))-uintptr(unsafe.Pointer(&c.head[0])) < uintptr(len(c.head))
		if inHead || !ref || len(b) <= copyMax {
			start := len(c.arena)
			c.arena = append(c.arena, b...)
			pieces[np] = c.arena[start:len(c.arena):len(c.arena)]
		} else {
			pieces[np] = b
		}
		np++
	}
	k := len(c.q)
	for range np {
		c.q = append(c.q, nil)
	}
	copy(c.q[np:], c.q[:k])
	copy(c.q, pieces[:np])
}
