//go:build linux

package shm

import (
	"fmt"
	"unsafe"
)

// overlay interprets mem (page-aligned, at least segmentSize bytes) as a control segment.
func overlay(mem []byte, nMR, nQP int) (*segment, error) {
	if nMR <= 0 || nQP <= 0 || len(mem) < segmentSize(nMR, nQP) {
		return nil, fmt.Errorf("%w: control segment of %d bytes for %d MRs, %d QPs", ErrBadSegment, len(mem), nMR, nQP)
	}
	base := unsafe.Pointer(unsafe.SliceData(mem))
	return &segment{
		mem: mem,
		hdr: (*ctlHeader)(base),
		mrs: unsafe.Slice((*mrSlot)(unsafe.Add(base, headerSize)), nMR),
		qps: unsafe.Slice((*qpSlot)(unsafe.Add(base, headerSize+nMR*mrSlotSize)), nQP),
	}, nil
}
