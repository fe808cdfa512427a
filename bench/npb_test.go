package bench

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The report of an NPB 3.4 MPI program (values aligned after the "=", "Total processes") and
// goarmci's kernels' (rank-prefixed by the launcher, "Ranks") read alike.
func TestParseNPB(t *testing.T) {
	mpi := `

 CG Benchmark Completed.
 Class           =                        A
 Size            =                    14000
 Iterations      =                       15
 Time in seconds =                     1.23
 Total processes =                        4
 Active processes=                        4
 Mop/s total     =                  1215.71
 Mop/s/process   =                   303.93
 Operation type  =           floating point
 Verification    =               SUCCESSFUL
 Version         =                    3.4.2
`
	r := ParseNPB(mpi)
	assert.Equal(t, NPBRun{benchmark: "CG", class: "A", Seconds: 1.23, Ranks: 4, Verified: true, Found: true}, r)

	ours := "[1] goarmci: rank 1 says Time in seconds = 9.99\n[0]  IS Benchmark Completed.\n[0]  Class = B\n" +
		"[0]  Time in seconds = 2.05\n[0]  Ranks = 2\n[0]  Verification = SUCCESSFUL\n"
	r = ParseNPB(ours)
	assert.Equal(t, NPBRun{benchmark: "IS", class: "B", Seconds: 2.05, Ranks: 2, Verified: true, Found: true}, r)

	r = ParseNPB(" Time in seconds = oops\n Verification    =             UNSUCCESSFUL\n")
	assert.False(t, r.Found)
	assert.True(t, math.IsNaN(r.Seconds))
	assert.False(t, r.Verified)
}
