package globalarray

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// PrintPatch writes the patch [lo, hi] to w (GA_Print_patch): a header naming the array and the
// patch, then one line per row along the last dimension, "name[i0, ..., lo..hi]: v v v", with
// 0-based subscripts. The calling rank fetches the patch with Get and prints it; unlike GA it is
// not collective, so call it from one rank (after a Sync) to print once.
//
// Errors: ErrShape, ErrOutOfBounds, ErrDestroyed; rma errors; the writer's error.
func (a *Array[T]) PrintPatch(ctx context.Context, w io.Writer, lo, hi []int) error {
	const call = "GA_Print_patch"
	if err := a.alive(call); err != nil {
		return err
	}
	if err := a.d.CheckPatch(lo, hi); err != nil {
		return fmt.Errorf("ga: %s %q: %w", call, a.name, err)
	}
	n := len(lo)
	total := 1
	for d := 0; d < n; d++ {
		total *= hi[d] - lo[d] + 1
	}
	buf := make([]T, total)
	if err := a.Get(ctx, lo, hi, buf, nil); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "global array %q of %v, dims %v, patch %v..%v:\n", a.name, a.typ, a.d.Dims(), lo, hi)
	row := hi[n-1] - lo[n-1] + 1
	sub := append([]int(nil), lo...)
	for k := 0; k < total; k += row {
		b.WriteString(a.name + "[")
		for d := 0; d < n-1; d++ {
			fmt.Fprintf(&b, "%d, ", sub[d])
		}
		fmt.Fprintf(&b, "%d..%d]:", lo[n-1], hi[n-1])
		for _, v := range buf[k : k+row] {
			fmt.Fprintf(&b, " %v", v)
		}
		b.WriteByte('\n')
		for d := n - 2; d >= 0; d-- {
			if sub[d] < hi[d] {
				sub[d]++
				break
			}
			sub[d] = lo[d]
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("ga: %s %q: %w", call, a.name, err)
	}
	return nil
}

// Print writes the whole array to w (GA_Print), as PrintPatch over all of it.
//
// Errors: as PrintPatch.
func (a *Array[T]) Print(ctx context.Context, w io.Writer) error {
	dims := a.d.Dims()
	hi := make([]int, len(dims))
	for d, e := range dims {
		hi[d] = e - 1
	}
	return a.PrintPatch(ctx, w, make([]int, len(dims)), hi)
}
