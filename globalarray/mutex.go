package globalarray

import (
	"context"
	"fmt"

	"github.com/goarmci/goarmci/rma"
)

// Mutexes are GA's mutexes (GA_Create_mutexes): n locks numbered 0..n-1, spread in blocks over
// the ranks (mutex m lives on rank m / ⌈n/np⌉ as its ARMCI mutex m mod ⌈n/np⌉), each a FIFO
// ticket lock taken with remote atomics (rma.Runtime.Lock). A runtime holds one set at a time.
type Mutexes struct {
	rt    *rma.Runtime
	n     int
	chunk int
}

// CreateMutexes creates n mutexes over the ranks of rt (GA_Create_mutexes). Collective: every
// rank passes the same n.
//
// Errors: ErrShape (n < 0), ErrMismatch (ranks passed different n); rma errors
// (ARMCI_Create_mutexes).
func CreateMutexes(ctx context.Context, rt *rma.Runtime, n int) (*Mutexes, error) {
	const call = "GA_Create_mutexes"
	var err error
	if n < 0 {
		err = fmt.Errorf("%w: %d mutexes", ErrShape, n)
	}
	if aerr := agree(ctx, rt, int64(n), err != nil); err == nil && aerr != nil {
		err = aerr
	}
	if err != nil {
		return nil, fmt.Errorf("ga: %s: %w", call, err)
	}
	np := rt.Size()
	m := &Mutexes{rt: rt, n: n, chunk: (n + np - 1) / np}
	if err := rt.CreateMutexes(ctx, m.chunk); err != nil {
		return nil, fmt.Errorf("ga: %s: %w", call, err)
	}
	return m, nil
}

// Len is the number of mutexes.
func (m *Mutexes) Len() int { return m.n }

func (m *Mutexes) where(call string, i int) (proc, local int, err error) {
	if i < 0 || i >= m.n {
		return 0, 0, fmt.Errorf("ga: %s: mutex %d of %d: %w", call, i, m.n, ErrOutOfBounds)
	}
	return i / m.chunk, i % m.chunk, nil
}

// Lock acquires mutex i (GA_Lock), blocking until it is granted or ctx ends.
//
// Errors: ErrOutOfBounds (no such mutex); rma errors (a failed owner, ctx).
func (m *Mutexes) Lock(ctx context.Context, i int) error {
	proc, local, err := m.where("GA_Lock", i)
	if err != nil {
		return err
	}
	if err := m.rt.Lock(ctx, local, proc); err != nil {
		return fmt.Errorf("ga: GA_Lock %d: %w", i, err)
	}
	return nil
}

// Unlock releases mutex i (GA_Unlock); the caller holds it.
//
// Errors: ErrOutOfBounds; rma errors.
func (m *Mutexes) Unlock(ctx context.Context, i int) error {
	proc, local, err := m.where("GA_Unlock", i)
	if err != nil {
		return err
	}
	if err := m.rt.Unlock(ctx, local, proc); err != nil {
		return fmt.Errorf("ga: GA_Unlock %d: %w", i, err)
	}
	return nil
}

// Destroy frees the mutexes (GA_Destroy_mutexes). Collective.
//
// Errors: rma errors (ARMCI_Destroy_mutexes).
func (m *Mutexes) Destroy(ctx context.Context) error {
	if err := m.rt.DestroyMutexes(ctx); err != nil {
		return fmt.Errorf("ga: GA_Destroy_mutexes: %w", err)
	}
	return nil
}
