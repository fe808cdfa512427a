package globalarray

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/goarmci/goarmci/globalarray/dist"
	"github.com/goarmci/goarmci/rma"
)

// ErrMemoryLimit: Create (or Duplicate) would take some member rank over its memory limit
// (SetMemoryLimit); every member then fails with it and no array is created.
var ErrMemoryLimit = errors.New("ga: memory limit exceeded")

// memory is one rank's account of its global arrays (GA's GA_total_memory and GAstat.curmem):
// the bytes its live arrays hold in this rank, the limit on them, and a record of each array
// for Summarize.
type memory struct {
	limit  int64 // bytes; < 0: no limit
	used   int64 // bytes of live arrays and of creations in progress
	next   int   // number of the next array
	arrays map[*rma.Segment]arrayRecord
}

// arrayRecord is what Summarize reports of one array.
type arrayRecord struct {
	n     int // creation number on this runtime
	name  string
	typ   rma.AccType
	d     *dist.Dist
	gw    []int
	bytes int64
	group int // members of the array's group; 0 on the world group
}

// accounts holds the memory account of each runtime that has live arrays or a limit; an
// account with neither is dropped. One lock: creation and destruction are rare.
var (
	accountsMu sync.Mutex
	accounts   = map[*rma.Runtime]*memory{}
)

// account is rt's account, created if absent (accountsMu held).
func account(rt *rma.Runtime) *memory {
	m := accounts[rt]
	if m == nil {
		m = &memory{limit: -1, arrays: map[*rma.Segment]arrayRecord{}}
		accounts[rt] = m
	}
	return m
}

// tidy drops rt's account if it records nothing (accountsMu held).
func tidy(rt *rma.Runtime, m *memory) {
	if m.limit < 0 && m.used == 0 && len(m.arrays) == 0 {
		delete(accounts, rt)
	}
}

// reserveMemory takes n bytes of this rank's memory limit for an array being created (GA's
// "check if everybody has enough memory left" at create: create agrees on the outcome with the
// other members in its one agreement collective, agreeOn). It reports whether the bytes did not
// fit (then nothing is reserved) and the limit and use at the time, for the error. On success
// the caller either records the array (register) or gives the bytes back (releaseMemory).
func reserveMemory(rt *rma.Runtime, n int64) (over bool, used, limit int64) {
	accountsMu.Lock()
	defer accountsMu.Unlock()
	m := account(rt)
	over = m.limit >= 0 && m.used+n > m.limit
	if !over {
		m.used += n
	}
	used, limit = m.used, m.limit
	tidy(rt, m)
	return over, used, limit
}

// releaseMemory gives back n bytes reserved by reserveMemory for an array that was not created.
func releaseMemory(rt *rma.Runtime, n int64) {
	accountsMu.Lock()
	defer accountsMu.Unlock()
	m := account(rt)
	m.used -= n
	tidy(rt, m)
}

// register records a created array whose bytes reserveMemory reserved.
func register[T Elem](a *Array[T], bytes int64) {
	accountsMu.Lock()
	defer accountsMu.Unlock()
	m := account(a.rt)
	rec := arrayRecord{n: m.next, name: a.name, typ: a.typ, d: a.d, gw: a.gw, bytes: bytes}
	if a.pg.g != nil {
		rec.group = a.pg.Nnodes()
	}
	m.next++
	m.arrays[a.seg] = rec
}

// unregister forgets a destroyed array and gives back its bytes.
func unregister(rt *rma.Runtime, seg *rma.Segment) {
	accountsMu.Lock()
	defer accountsMu.Unlock()
	m := account(rt)
	if rec, ok := m.arrays[seg]; ok {
		m.used -= rec.bytes
		delete(m.arrays, seg)
	}
	tidy(rt, m)
}

// SetMemoryLimit limits the bytes the global arrays of rt may hold on this rank to limit
// (GA_Set_memory_limit; a negative limit removes it, GA's default). Ghost cells count. A Create
// or Duplicate that would exceed some member's limit fails on every member with ErrMemoryLimit
// and creates nothing. Arrays that already exist are kept even if they exceed a new limit.
// Per rank, not collective: ranks may have different limits.
func SetMemoryLimit(rt *rma.Runtime, limit int64) {
	accountsMu.Lock()
	defer accountsMu.Unlock()
	m := account(rt)
	m.limit = max(limit, -1)
	tidy(rt, m)
}

// MemoryLimited reports whether a memory limit is set on this rank (GA_Memory_limited).
func MemoryLimited(rt *rma.Runtime) bool {
	accountsMu.Lock()
	defer accountsMu.Unlock()
	m := accounts[rt]
	return m != nil && m.limit >= 0
}

// MemoryAvail returns the bytes this rank may still give to new global arrays under its limit
// (GA_Memory_avail); ok is false when no limit is set, where GA returns a negative value (the
// bound cannot be determined).
func MemoryAvail(rt *rma.Runtime) (bytes int64, ok bool) {
	accountsMu.Lock()
	defer accountsMu.Unlock()
	m := accounts[rt]
	if m == nil || m.limit < 0 {
		return 0, false
	}
	return max(m.limit-m.used, 0), true
}

// InquireMemory returns the bytes of rt's live global arrays held by this rank, ghost cells
// included (GA_Inquire_memory).
func InquireMemory(rt *rma.Runtime) int64 {
	accountsMu.Lock()
	defer accountsMu.Unlock()
	var n int64
	if m := accounts[rt]; m != nil {
		for _, rec := range m.arrays {
			n += rec.bytes
		}
	}
	return n
}

// Inquire returns the array's element type and a copy of its extents (NGA_Inquire; Name is
// GA_Inquire_name, NDim GA_Ndim).
func (a *Array[T]) Inquire() (typ rma.AccType, dims []int) { return a.typ, a.d.Dims() }

// Summarize writes to w a summary of rt's live global arrays as this rank sees them
// (GA_Summarize): a header line with their number, the bytes they hold on this rank and the
// limit, then one line per array in creation order,
//
//	array 2 "fock": float64, dims [40 40], grid [2 2], 3200 bytes here
//
// with ", ghosts [w...]" and ", group of n ranks" when they apply. verbose adds one line per
// block: its owner (a group rank on an array of a group) and its inclusive bounds. Not
// collective (GA_Summarize prints on each process that calls it).
//
// Errors: the writer's error.
func Summarize(rt *rma.Runtime, w io.Writer, verbose bool) error {
	accountsMu.Lock()
	var recs []arrayRecord
	limit := int64(-1)
	if m := accounts[rt]; m != nil {
		for _, rec := range m.arrays {
			recs = append(recs, rec)
		}
		limit = m.limit
	}
	accountsMu.Unlock()
	slices.SortFunc(recs, func(x, y arrayRecord) int { return x.n - y.n })
	var held int64
	for _, rec := range recs {
		held += rec.bytes
	}
	var b strings.Builder
	fmt.Fprintf(&b, "global arrays on rank %d of %d: %d arrays, %d bytes here, memory limit ", rt.Rank(), rt.Size(), len(recs), held)
	if limit < 0 {
		b.WriteString("none\n")
	} else {
		fmt.Fprintf(&b, "%d bytes\n", limit)
	}
	for _, rec := range recs {
		fmt.Fprintf(&b, "  array %d %q: %v, dims %v, grid %v, %d bytes here", rec.n, rec.name, rec.typ, rec.d.Dims(), rec.d.Grid(), rec.bytes)
		if rec.gw != nil {
			fmt.Fprintf(&b, ", ghosts %v", rec.gw)
		}
		if rec.group > 0 {
			fmt.Fprintf(&b, ", group of %d ranks", rec.group)
		}
		b.WriteByte('\n')
		if !verbose {
			continue
		}
		for k := 0; k < rec.d.NBlocks(); k++ {
			lo, hi := rec.d.BlockBounds(k)
			fmt.Fprintf(&b, "    block %d on rank %d: %v..%v\n", k, rec.d.BlockOwner(k), lo, hi)
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("ga: GA_Summarize: %w", err)
	}
	return nil
}
