// Command matmul multiplies two distributed n×n matrices with Global Arrays, C = A·B, and checks
// the product against its closed form.
//
// The algorithm is owner-computes, as GA's own ga_dgemm: every rank computes its block of C
// (NGA_Distribution) by walking the shared dimension in panels of kb columns, fetching the
// panel of A's rows and of B's columns it needs with non-blocking NGA_NbGet (the next panel is
// fetched while the current one is multiplied), multiplying locally with gonum's BLAS dgemm, and
// writing C's block in place through NGA_Access. A(i,j) = i+j+1 and B(i,j) = i−j+2 (0-based) give
// C(i,j) = Σ_k (i+k+1)(k−j+2), an integer known in closed form, so the check is exact.
//
//	go run ./cmd/goarmci run -np 4 ./examples/matmul -n 1024
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/goarmci/goarmci/globalarray"
	"github.com/goarmci/goarmci/rma"
)

// ErrVerify: the product differs from the closed form.
var ErrVerify = errors.New("matmul: verification failed")

// Result is what a run reports.
type Result struct {
	N, Ranks int
	Seconds  float64 // slowest rank's multiply time
	MaxErr   float64 // largest |C(i,j) − exact| over all ranks
}

// GFlops is 2n³ floating-point operations per second, in 10⁹/s.
func (r Result) GFlops() float64 {
	return 2 * float64(r.N) * float64(r.N) * float64(r.N) / r.Seconds / 1e9
}

func a(i, j int) float64 { return float64(i + j + 1) }
func b(i, j int) float64 { return float64(i - j + 2) }

// exact is Σ_{k<n} (i+k+1)(k−j+2).
func exact(n, i, j int) float64 {
	p, q := float64(i+1), float64(2-j)
	s1 := float64(n) * float64(n-1) / 2
	s2 := float64(n-1) * float64(n) * float64(2*n-1) / 6
	return float64(n)*p*q + (p+q)*s1 + s2
}

// fill sets the local block of m from f (NGA_Access).
func fill(m *globalarray.Array[float64], rank int, f func(i, j int) float64) error {
	lo, hi := m.Distribution(rank)
	data, ld, err := m.Access()
	if err != nil {
		return err
	}
	defer m.Release()
	for i := lo[0]; i <= hi[0]; i++ {
		for j := lo[1]; j <= hi[1]; j++ {
			data[(i-lo[0])*ld[0]+(j-lo[1])] = f(i, j)
		}
	}
	return nil
}

// Run multiplies n×n matrices on every rank of rt with panels of kb columns; collective.
func Run(ctx context.Context, rt *rma.Runtime, n, kb int) (Result, error) {
	if n < 1 || kb < 1 {
		return Result{}, fmt.Errorf("matmul: n = %d, kb = %d: both must be positive", n, kb)
	}
	dims := []int{n, n}
	mats := make([]*globalarray.Array[float64], 3)
	for k, name := range []string{"A", "B", "C"} {
		m, err := globalarray.Create[float64](ctx, rt, name, dims)
		if err != nil {
			return Result{}, err
		}
		defer m.Destroy(ctx)
		mats[k] = m
	}
	A, B, C := mats[0], mats[1], mats[2]
	me := rt.Rank()
	if err := fill(A, me, a); err != nil {
		return Result{}, err
	}
	if err := fill(B, me, b); err != nil {
		return Result{}, err
	}
	if err := globalarray.Sync(ctx, rt); err != nil {
		return Result{}, err
	}

	start := time.Now()
	lo, hi := C.Distribution(me)
	rows, cols := hi[0]-lo[0]+1, hi[1]-lo[1]+1
	if rows > 0 && cols > 0 {
		cdata, ld, err := C.Access()
		if err != nil {
			return Result{}, err
		}
		cm := blas64.General{Rows: rows, Cols: cols, Stride: ld[0], Data: cdata}
		// two panel buffers each for A and B: multiply one while the next arrives
		abuf := [2][]float64{make([]float64, rows*kb), make([]float64, rows*kb)}
		bbuf := [2][]float64{make([]float64, kb*cols), make([]float64, kb*cols)}
		fetch := func(k0, slot int) (*globalarray.Handle, *globalarray.Handle, int, error) {
			w := min(kb, n-k0)
			ha, err := A.NbGet(ctx, []int{lo[0], k0}, []int{hi[0], k0 + w - 1}, abuf[slot][:rows*w], nil)
			if err != nil {
				return nil, nil, 0, err
			}
			hb, err := B.NbGet(ctx, []int{k0, lo[1]}, []int{k0 + w - 1, hi[1]}, bbuf[slot][:w*cols], nil)
			if err != nil {
				_ = ha.Wait(ctx)
				return nil, nil, 0, err
			}
			return ha, hb, w, nil
		}
		ha, hb, w, err := fetch(0, 0)
		if err != nil {
			C.Release()
			return Result{}, err
		}
		for k0, slot := 0, 0; k0 < n; k0, slot = k0+kb, 1-slot {
			errA, errB := ha.Wait(ctx), hb.Wait(ctx)
			if err := errors.Join(errA, errB); err != nil {
				C.Release()
				return Result{}, err
			}
			cw := w
			if next := k0 + kb; next < n {
				if ha, hb, w, err = fetch(next, 1-slot); err != nil {
					C.Release()
					return Result{}, err
				}
			}
			am := blas64.General{Rows: rows, Cols: cw, Stride: cw, Data: abuf[slot][:rows*cw]}
			bm := blas64.General{Rows: cw, Cols: cols, Stride: cols, Data: bbuf[slot][:cw*cols]}
			blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, am, bm, 1, cm)
		}
		C.Release()
	}
	secs := []float64{time.Since(start).Seconds()}
	if err := globalarray.Sync(ctx, rt); err != nil {
		return Result{}, err
	}

	// verify the local block against the closed form
	maxErr := []float64{0}
	if rows > 0 && cols > 0 {
		cdata, ld, err := C.Access()
		if err != nil {
			return Result{}, err
		}
		for i := lo[0]; i <= hi[0]; i++ {
			for j := lo[1]; j <= hi[1]; j++ {
				if d := abs(cdata[(i-lo[0])*ld[0]+(j-lo[1])] - exact(n, i, j)); d > maxErr[0] {
					maxErr[0] = d
				}
			}
		}
		C.Release()
	}
	if err := globalarray.GopMax(ctx, rt, maxErr); err != nil {
		return Result{}, err
	}
	if err := globalarray.GopMax(ctx, rt, secs); err != nil {
		return Result{}, err
	}
	res := Result{N: n, Ranks: rt.Size(), Seconds: secs[0], MaxErr: maxErr[0]}
	if res.MaxErr != 0 {
		return res, fmt.Errorf("%w: largest error %g", ErrVerify, res.MaxErr)
	}
	return res, nil
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func main() {
	n := flag.Int("n", 512, "matrix order")
	kb := flag.Int("kb", 128, "panel width (columns of A / rows of B fetched at a time)")
	flag.Parse()
	ctx := context.Background()
	rt, err := rma.Init(ctx, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	res, err := Run(ctx, rt, *n, *kb)
	if rt.Rank() == 0 {
		fmt.Printf(" Matrix multiply C = A*B\n n = %d\n Ranks = %d\n BLAS = %s\n Time in seconds = %.3f\n GFLOP/s = %.2f\n",
			res.N, res.Ranks, globalarray.BLASBackend(), res.Seconds, res.GFlops())
		if err == nil {
			fmt.Println(" Verification = SUCCESSFUL")
		} else {
			fmt.Println(" Verification = UNSUCCESSFUL:", err)
		}
	}
	ferr := rt.Finalize(ctx)
	switch {
	case errors.Is(err, ErrVerify):
		os.Exit(1)
	case err != nil || ferr != nil:
		fmt.Fprintln(os.Stderr, errors.Join(err, ferr))
		os.Exit(2)
	}
}
