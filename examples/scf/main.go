// Command scf runs a closed-shell self-consistent field (SCF) iteration on Global Arrays, in
// the pattern of GA's own SCF example: a Fock matrix built in parallel from a density matrix,
// with tasks handed out by a shared counter, then the density rebuilt from the Fock matrix's
// occupied eigenvectors with a distributed matrix multiply, until the energy stops changing.
//
// The problem is synthetic and deterministic: n orthonormal basis functions on a line, a
// one-electron (core) matrix h and two-electron integrals in closed form (Integrals), and nocc
// doubly occupied orbitals. One iteration, with D the density matrix:
//
//	F(i,j) = h(i,j) + Σ_kl D(k,l)·(2·(ij|kl) − (ik|jl))     Fock build
//	E      = Σ_ij D(i,j)·(h(i,j) + F(i,j))                 energy
//	F·C = C·ε, C_occ = the nocc lowest eigenvectors        diagonalization
//	D'     = C_occ·C_occᵀ                                   new density (GA_Dgemm)
//	D      = (1−λ)·D' + λ·D                                damping (GA_Add)
//
// The Fock build is split into block quartets (I, J, K, L) of nb×nb blocks; a rank takes the
// next quartet from a shared counter (NGA_Read_inc), fetches the density blocks D(K,L) and
// D(J,L) it needs (NGA_Get), and accumulates its Coulomb contribution into F(I,J) and its
// exchange contribution into F(I,K) (NGA_Acc); a symmetric update (GA_Symmetrize) follows. Rank
// 0 diagonalizes F (gonum's symmetric eigensolver, as GA_Diag_seq) and writes C_occ; every rank
// then takes part in D' = C_occ·C_occᵀ (globalarray.Gemm). The first density comes from h alone
// (the core guess). The run stops when |E − E_previous| < tol.
//
//	go run ./cmd/goarmci run -np 4 ./examples/scf -n 48 -nb 8
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/goarmci/goarmci/globalarray"
	"github.com/goarmci/goarmci/rma"
)

// ErrConverge: the energy did not converge within the iteration limit.
var ErrConverge = errors.New("scf: no convergence")

// ErrArgs: a bad problem definition.
var ErrArgs = errors.New("scf: bad arguments")

// Problem is one SCF problem and how to iterate it.
type Problem struct {
	N       int     // basis functions
	NOcc    int     // doubly occupied orbitals, 1 ≤ NOcc < N
	NB      int     // block size of the Fock build's tasks
	Damping float64 // λ in [0, 1): share of the previous density kept
	Tol     float64 // convergence threshold on the energy change
	MaxIter int
}

func (p Problem) check() error {
	switch {
	case p.N < 2 || p.NOcc < 1 || p.NOcc >= p.N:
		return fmt.Errorf("%w: n = %d, nocc = %d (need 1 ≤ nocc < n)", ErrArgs, p.N, p.NOcc)
	case p.NB < 1 || p.NB > p.N:
		return fmt.Errorf("%w: block size %d for n = %d", ErrArgs, p.NB, p.N)
	case p.Damping < 0 || p.Damping >= 1 || p.Tol <= 0 || p.MaxIter < 1:
		return fmt.Errorf("%w: damping %g, tol %g, maxiter %d", ErrArgs, p.Damping, p.Tol, p.MaxIter)
	}
	return nil
}

// Integrals are the problem's closed-form matrix elements over basis indices i, j, k, l in
// [0, n): an overlap-like decay s(i,j) = exp(−α(i−j)²) and a centre x(i,j) = (i+j)/2 per pair.
type Integrals struct {
	s []float64 // s(i,j), row-major n×n
	r []float64 // γ/√(1 + (m/2w)²) at m + 2(n−1) for m = i+j−k−l in [−2(n−1), 2(n−1)]
	n int
}

const (
	alpha   = 0.3 // decay of a pair's overlap with the distance of its indices
	gamma   = 0.6 // strength of the two-electron interaction
	spacing = 0.5 // one-electron level spacing along the diagonal of h
	hop     = 0.2 // hopping between basis functions, times their overlap
	width   = 8.0 // range of the interaction, in basis indices
)

// NewIntegrals tabulates the pair overlaps of n basis functions.
func NewIntegrals(n int) *Integrals {
	s := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			d := float64(i - j)
			s[i*n+j] = math.Exp(-alpha * d * d)
		}
	}
	r := make([]float64, 4*n-3)
	for m := range r {
		d := float64(m-2*(n-1)) / (2 * width)
		r[m] = gamma / math.Sqrt(1+d*d)
	}
	return &Integrals{s: s, r: r, n: n}
}

// H is the one-electron (core) matrix: levels spacing·i − 1 on the diagonal, a hopping
// −hop·s(i,j) off it.
func (g *Integrals) H(i, j int) float64 {
	if i == j {
		return spacing*float64(i) - 1
	}
	return -hop * g.s[i*g.n+j]
}

// ERI is the two-electron integral (ij|kl) = γ·s(i,j)·s(k,l) / √(1 + ((x(i,j) − x(k,l))/w)²),
// with the 8-fold symmetry of real integrals: (ij|kl) = (ji|kl) = (ij|lk) = (kl|ij).
func (g *Integrals) ERI(i, j, k, l int) float64 {
	return g.s[i*g.n+j] * g.s[k*g.n+l] * g.r[i+j-k-l+2*(g.n-1)]
}

// Result is what a run reports (the same on every rank).
type Result struct {
	Energy     float64   // converged energy
	Energies   []float64 // energy of each iteration
	Iterations int
	Ranks      int
	Tasks      int     // Fock build tasks per iteration
	Seconds    float64 // slowest rank's time in the iterations
}

// Run iterates p to convergence on every rank of rt; collective. Errors: ErrArgs, ErrConverge
// (with the result so far), globalarray and rma errors.
func Run(ctx context.Context, rt *rma.Runtime, p Problem) (Result, error) {
	if err := p.check(); err != nil {
		return Result{}, err
	}
	s, err := newSolver(ctx, rt, p)
	if err != nil {
		return Result{}, err
	}
	defer s.destroy(ctx)
	res := Result{Ranks: rt.Size(), Tasks: s.nblk * s.nblk * s.nblk * s.nblk}
	start := time.Now()
	// core guess: the density of h's eigenvectors
	if err := s.h.Copy(ctx, s.f); err != nil {
		return res, err
	}
	if err := s.density(ctx, 0); err != nil {
		return res, err
	}
	prev := math.Inf(1)
	for it := 1; it <= p.MaxIter; it++ {
		e, err := s.fock(ctx)
		if err != nil {
			return res, err
		}
		res.Energies = append(res.Energies, e)
		res.Energy, res.Iterations = e, it
		if math.Abs(e-prev) < p.Tol {
			break
		}
		prev = e
		if err := s.density(ctx, p.Damping); err != nil {
			return res, err
		}
	}
	secs := []float64{time.Since(start).Seconds()}
	if err := globalarray.GopMax(ctx, rt, secs); err != nil {
		return res, err
	}
	res.Seconds = secs[0]
	if n := len(res.Energies); n < 2 || math.Abs(res.Energies[n-1]-res.Energies[n-2]) >= p.Tol {
		return res, fmt.Errorf("%w: |ΔE| above %g after %d iterations", ErrConverge, p.Tol, p.MaxIter)
	}
	return res, nil
}

// solver holds the global arrays of a run.
type solver struct {
	rt      *rma.Runtime
	p       Problem
	g       *Integrals
	nblk    int
	h, f, d *globalarray.Array[float64] // core, Fock and density matrices, n×n
	dnew    *globalarray.Array[float64] // C_occ·C_occᵀ, n×n
	c       *globalarray.Array[float64] // occupied orbitals C_occ, n×nocc
	counter *globalarray.Array[int64]   // the task counter
}

func newSolver(ctx context.Context, rt *rma.Runtime, p Problem) (s *solver, err error) {
	s = &solver{rt: rt, p: p, g: NewIntegrals(p.N), nblk: (p.N + p.NB - 1) / p.NB}
	defer func() {
		if err != nil {
			s.destroy(ctx)
		}
	}()
	sq := []int{p.N, p.N}
	for _, m := range []struct {
		a    **globalarray.Array[float64]
		name string
		dims []int
	}{{&s.h, "h", sq}, {&s.f, "fock", sq}, {&s.d, "density", sq}, {&s.dnew, "cc", sq}, {&s.c, "orbitals", []int{p.N, p.NOcc}}} {
		if *m.a, err = globalarray.Create[float64](ctx, rt, m.name, m.dims); err != nil {
			return s, err
		}
	}
	if s.counter, err = globalarray.Create[int64](ctx, rt, "task counter", []int{1}); err != nil {
		return s, err
	}
	// every rank fills its block of h in place (NGA_Access)
	lo, hi := s.h.Distribution(rt.Rank())
	data, ld, err := s.h.Access()
	if err != nil {
		return s, err
	}
	for i := lo[0]; i <= hi[0]; i++ {
		for j := lo[1]; j <= hi[1]; j++ {
			data[(i-lo[0])*ld[0]+j-lo[1]] = s.g.H(i, j)
		}
	}
	s.h.Release()
	return s, globalarray.Sync(ctx, rt)
}

func (s *solver) destroy(ctx context.Context) {
	for _, a := range []*globalarray.Array[float64]{s.h, s.f, s.d, s.dnew, s.c} {
		if a != nil {
			_ = a.Destroy(ctx)
		}
	}
	if s.counter != nil {
		_ = s.counter.Destroy(ctx)
	}
}

// block is the index range [lo, hi] of block b.
func (s *solver) block(b int) (lo, hi int) {
	return b * s.p.NB, min((b+1)*s.p.NB, s.p.N) - 1
}

// fock builds F = h + G(D), symmetrizes it and returns the energy Σ D·(h + F).
func (s *solver) fock(ctx context.Context) (float64, error) {
	if err := s.h.Copy(ctx, s.f); err != nil {
		return 0, err
	}
	if err := s.counter.Zero(ctx); err != nil {
		return 0, err
	}
	nb, nblk := s.p.NB, s.nblk
	dkl, djl := make([]float64, nb*nb), make([]float64, nb*nb)
	fij, fik := make([]float64, nb*nb), make([]float64, nb*nb)
	ntask := int64(nblk * nblk * nblk * nblk)
	for {
		t, err := s.counter.ReadInc(ctx, []int{0}, 1)
		if err != nil {
			return 0, err
		}
		if t >= ntask {
			break
		}
		q := int(t)
		bi, bj, bk, bl := q/(nblk*nblk*nblk), q/(nblk*nblk)%nblk, q/nblk%nblk, q%nblk
		if err := s.quartet(ctx, bi, bj, bk, bl, dkl, djl, fij, fik); err != nil {
			return 0, err
		}
	}
	if err := globalarray.Sync(ctx, s.rt); err != nil {
		return 0, err
	}
	if err := globalarray.Symmetrize(ctx, s.f); err != nil {
		return 0, err
	}
	eh, err := s.d.Dot(ctx, s.h)
	if err != nil {
		return 0, err
	}
	ef, err := s.d.Dot(ctx, s.f)
	if err != nil {
		return 0, err
	}
	return eh + ef, nil
}

// quartet adds the contributions of block quartet (I, J, K, L): Coulomb 2·Σ_kl D(k,l)(ij|kl)
// to F(I,J), exchange −Σ_jl D(j,l)(ij|kl) to F(I,K).
func (s *solver) quartet(ctx context.Context, bi, bj, bk, bl int, dkl, djl, fij, fik []float64) error {
	il, ih := s.block(bi)
	jl, jh := s.block(bj)
	kl, kh := s.block(bk)
	ll, lh := s.block(bl)
	ni, nj, nk, nl := ih-il+1, jh-jl+1, kh-kl+1, lh-ll+1
	dkl, djl, fij, fik = dkl[:nk*nl], djl[:nj*nl], fij[:ni*nj], fik[:ni*nk]
	if err := s.d.Get(ctx, []int{kl, ll}, []int{kh, lh}, dkl, nil); err != nil {
		return err
	}
	if err := s.d.Get(ctx, []int{jl, ll}, []int{jh, lh}, djl, nil); err != nil {
		return err
	}
	clear(fij)
	clear(fik)
	for i := 0; i < ni; i++ {
		for j := 0; j < nj; j++ {
			for k := 0; k < nk; k++ {
				for l := 0; l < nl; l++ {
					g := s.g.ERI(il+i, jl+j, kl+k, ll+l)
					fij[i*nj+j] += 2 * dkl[k*nl+l] * g
					fik[i*nk+k] -= djl[j*nl+l] * g
				}
			}
		}
	}
	if err := s.f.Acc(ctx, []int{il, jl}, []int{ih, jh}, fij, nil, 1); err != nil {
		return err
	}
	return s.f.Acc(ctx, []int{il, kl}, []int{ih, kh}, fik, nil, 1)
}

// density diagonalizes F on rank 0, writes its nocc lowest eigenvectors to C and sets
// D = (1−λ)·C·Cᵀ + λ·D (λ = 0: D = C·Cᵀ).
func (s *solver) density(ctx context.Context, lambda float64) error {
	n, nocc := s.p.N, s.p.NOcc
	if s.rt.Rank() == 0 {
		f := make([]float64, n*n)
		if err := s.f.Get(ctx, []int{0, 0}, []int{n - 1, n - 1}, f, nil); err != nil {
			return err
		}
		occ, err := Occupied(f, n, nocc)
		if err != nil {
			return err
		}
		if err := s.c.Put(ctx, []int{0, 0}, []int{n - 1, nocc - 1}, occ, nil); err != nil {
			return err
		}
	}
	if err := globalarray.Sync(ctx, s.rt); err != nil {
		return err
	}
	if err := globalarray.Gemm(ctx, false, true, 1, s.c, s.c, 0, s.dnew); err != nil {
		return err
	}
	return globalarray.Add(ctx, 1-lambda, s.dnew, lambda, s.d, s.d)
}

// Occupied returns the eigenvectors of the nocc lowest eigenvalues of the symmetric n×n matrix
// f (row-major), as the columns of a row-major n×nocc matrix.
func Occupied(f []float64, n, nocc int) ([]float64, error) {
	var es mat.EigenSym
	if !es.Factorize(mat.NewSymDense(n, f), true) {
		return nil, fmt.Errorf("%w: eigensolver did not converge", ErrConverge)
	}
	var v mat.Dense
	es.VectorsTo(&v) // columns in ascending order of eigenvalue
	occ := make([]float64, n*nocc)
	for i := 0; i < n; i++ {
		for k := 0; k < nocc; k++ {
			occ[i*nocc+k] = v.At(i, k)
		}
	}
	return occ, nil
}

func main() {
	var p Problem
	flag.IntVar(&p.N, "n", 48, "basis functions")
	flag.IntVar(&p.NOcc, "nocc", 0, "occupied orbitals (default n/4)")
	flag.IntVar(&p.NB, "nb", 8, "block size of the Fock build's tasks")
	flag.Float64Var(&p.Damping, "damping", 0, "share of the previous density kept each iteration")
	flag.Float64Var(&p.Tol, "tol", 1e-10, "convergence threshold on the energy change")
	flag.IntVar(&p.MaxIter, "maxiter", 50, "iteration limit")
	flag.Parse()
	if p.NOcc == 0 {
		p.NOcc = max(p.N/4, 1)
	}
	ctx := context.Background()
	rt, err := rma.Init(ctx, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	res, err := Run(ctx, rt, p)
	if rt.Rank() == 0 {
		fmt.Printf(" SCF on Global Arrays\n n = %d\n nocc = %d\n Block size = %d\n Ranks = %d\n Tasks per iteration = %d\n",
			p.N, p.NOcc, p.NB, res.Ranks, res.Tasks)
		for i, e := range res.Energies {
			fmt.Printf(" Iteration %2d energy = %.12f\n", i+1, e)
		}
		fmt.Printf(" Energy = %.12f\n Iterations = %d\n Time in seconds = %.3f\n", res.Energy, res.Iterations, res.Seconds)
		if err == nil {
			fmt.Println(" Convergence = SUCCESSFUL")
		} else {
			fmt.Println(" Convergence = UNSUCCESSFUL:", err)
		}
	}
	ferr := rt.Finalize(ctx)
	switch {
	case errors.Is(err, ErrConverge):
		os.Exit(1)
	case err != nil || ferr != nil:
		fmt.Fprintln(os.Stderr, errors.Join(err, ferr))
		os.Exit(2)
	}
}
