package cg

import (
	"fmt"
	"math"
	"slices"

	"github.com/goarmci/goarmci/examples/nas/internal/npb"
)

// Matrix is a block of rows [FirstRow, FirstRow+len(RowStr)-1) of the CG matrix in compressed
// sparse rows: the nonzeros of local row j (global row FirstRow+j) are A[RowStr[j]:RowStr[j+1]]
// in global columns ColIdx[...] (0-based, ascending).
type Matrix struct {
	N        int // order of the whole matrix
	FirstRow int // global index of local row 0
	RowStr   []int
	ColIdx   []int32
	A        []float64
}

// Rows returns the number of local rows.
func (m *Matrix) Rows() int { return len(m.RowStr) - 1 }

// NNZ returns the number of stored nonzeros.
func (m *Matrix) NNZ() int { return m.RowStr[len(m.RowStr)-1] }

// MulVec computes q[j] = Σ_k A[j,k]·p[k] for the local rows (len(q) ≥ Rows(), len(p) = N),
// summing each row in ascending column order like the reference.
func (m *Matrix) MulVec(p, q []float64) {
	rs := m.RowStr
	for j := 0; j < len(rs)-1; j++ {
		lo, hi := rs[j], rs[j+1]
		cols := m.ColIdx[lo:hi]
		vals := m.A[lo:hi]
		vals = vals[:len(cols)]
		sum := 0.0
		for k, c := range cols {
			sum += vals[k] * p[c]
		}
		q[j] = sum
	}
}

// outer holds the n sparse vectors makea generates (one per outer product), nonzer+1 slots each.
type outer struct {
	stride int
	arow   []int32   // nonzeros of vector i
	acol   []int32   // 0-based columns, stride per vector
	aelt   []float64 // values, stride per vector
}

// generate runs the generator part of makea: one randlc draw (the main program's zeta =
// randlc(tran, amult)), then for each of the n outer vectors sprnvc (nonzer distinct random
// positions with random values) and vecset (element iouter set to 0.5).
func generate(p Params) *outer {
	n, nonzer := p.NA, p.NonZer
	o := &outer{
		stride: nonzer + 1,
		arow:   make([]int32, n),
		acol:   make([]int32, n*(nonzer+1)),
		aelt:   make([]float64, n*(nonzer+1)),
	}
	rng := npb.NewRand(npb.Seed, npb.Mult)
	rng.Next()
	// nn1 is the smallest power of two not less than n (the reference's loop doubles at least once)
	nn1 := 1
	for {
		nn1 *= 2
		if nn1 >= n {
			break
		}
	}
	fnn1 := float64(nn1)
	for i := 0; i < n; i++ {
		iv := o.acol[i*o.stride : (i+1)*o.stride]
		v := o.aelt[i*o.stride : (i+1)*o.stride]
		// sprnvc: iv holds 1-based positions while generating
		nzv := 0
		for nzv < nonzer {
			vecelt := rng.Next()
			vecloc := rng.Next()
			pos := int32(int(fnn1*vecloc) + 1) // icnvrt(vecloc, nn1) + 1
			if int(pos) > n {
				continue
			}
			if slices.Contains(iv[:nzv], pos) {
				continue
			}
			v[nzv] = vecelt
			iv[nzv] = pos
			nzv++
		}
		// vecset(n, v, iv, nzv, i+1, 0.5)
		set := false
		for k := 0; k < nzv; k++ {
			if iv[k] == int32(i+1) {
				v[k] = 0.5
				set = true
			}
		}
		if !set {
			v[nzv] = 0.5
			iv[nzv] = int32(i + 1)
			nzv++
		}
		o.arow[i] = int32(nzv)
		for k := 0; k < nzv; k++ {
			iv[k]-- // to 0-based columns
		}
	}
	return o
}

// MakeA generates rows [firstRow, lastRow) (0-based, lastRow exclusive) of the CG matrix of class
// p, exactly as NPB's makea/sparse do for those rows: element (j, c) is the sum, in the order of
// the outer vectors i (and of positions within a vector), of size_i·v_i[j]·v_i[c], with
// rcond − shift added on the diagonal contribution of vector i = j; size_i = rcond^(i/n).
// Every rank can call it for its own rows: the generator is deterministic and replayed in full.
func MakeA(p Params, firstRow, lastRow int) (*Matrix, error) {
	n := p.NA
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if firstRow < 0 || lastRow > n || firstRow > lastRow {
		return nil, fmt.Errorf("cg makea rows [%d,%d) of %d: %w", firstRow, lastRow, n, ErrRange)
	}
	o := generate(p)
	nrows := lastRow - firstRow

	// size_i = ratio^i by repeated multiplication, as the reference accumulates it
	size := make([]float64, n)
	ratio := math.Pow(RCond, 1.0/float64(n))
	s := 1.0
	for i := range size {
		size[i] = s
		s *= ratio
	}

	// Transpose: for each local row j, the (vector i, position nza) pairs with acol[i][nza] = j,
	// in ascending i: the order in which the reference adds their contributions to row j.
	cnt := make([]int, nrows+1)
	for i := 0; i < n; i++ {
		base := i * o.stride
		for _, j := range o.acol[base : base+int(o.arow[i])] {
			if int(j) >= firstRow && int(j) < lastRow {
				cnt[int(j)-firstRow+1]++
			}
		}
	}
	for j := 1; j <= nrows; j++ {
		cnt[j] += cnt[j-1]
	}
	refs := make([]int32, cnt[nrows]) // flat index i*stride+nza
	fill := slices.Clone(cnt[:nrows])
	for i := 0; i < n; i++ {
		base := i * o.stride
		for nza, j := range o.acol[base : base+int(o.arow[i])] {
			if int(j) >= firstRow && int(j) < lastRow {
				r := int(j) - firstRow
				refs[fill[r]] = int32(base + nza)
				fill[r]++
			}
		}
	}

	m := &Matrix{N: n, FirstRow: firstRow, RowStr: make([]int, nrows+1)}
	estimate := cnt[nrows] * (p.NonZer + 1)
	m.ColIdx = make([]int32, 0, estimate)
	m.A = make([]float64, 0, estimate)
	acc := make([]float64, n)
	mark := make([]int32, n) // row stamp+1 of the last row that touched column c
	var cols []int32
	for r := 0; r < nrows; r++ {
		j := int32(firstRow + r)
		cols = cols[:0]
		for _, ref := range refs[cnt[r]:cnt[r+1]] {
			i := int(ref) / o.stride
			base := i * o.stride
			scale := size[i] * o.aelt[ref]
			nzv := int(o.arow[i])
			for nzrow := 0; nzrow < nzv; nzrow++ {
				jcol := o.acol[base+nzrow]
				va := o.aelt[base+nzrow] * scale
				if jcol == j && int(j) == i {
					va = va + RCond - p.Shift
				}
				if mark[jcol] != j+1 {
					mark[jcol] = j + 1
					acc[jcol] = 0
					cols = append(cols, jcol)
				}
				acc[jcol] += va
			}
		}
		slices.Sort(cols)
		for _, c := range cols {
			m.ColIdx = append(m.ColIdx, c)
			m.A = append(m.A, acc[c])
		}
		m.RowStr[r+1] = len(m.ColIdx)
	}
	return m, nil
}
