package npb

import (
	"fmt"
	"io"
)

// Report is the result block every NPB kernel prints at the end (c_print_results/print_results),
// with Ranks for the number of processes.
type Report struct {
	Name       string  // kernel: "CG", "IS"
	Class      Class   // problem class
	Size       string  // problem size as NPB prints it (e.g. "14000", "8388608")
	Iterations int     // timed iterations
	Ranks      int     // processes that ran the kernel
	Seconds    float64 // timed section, seconds
	Mops       float64 // millions of operations per second, all ranks together
	OpType     string  // "floating point", "keys ranked"
	Verified   bool    // the kernel's official verification passed
	// Extra lines printed after the standard block (e.g. CG's zeta), already formatted.
	Extra []string
}

// Print writes the report. Each line is " Key = value" (one space either side of '='), so
// " Class = A", " Ranks = 4", " Verification = SUCCESSFUL", " Time in seconds = ...",
// " Mop/s total = ..." can be matched literally.
func (r Report) Print(w io.Writer) error {
	verif := "UNSUCCESSFUL"
	if r.Verified {
		verif = "SUCCESSFUL"
	}
	perRank := 0.0
	if r.Ranks > 0 {
		perRank = r.Mops / float64(r.Ranks)
	}
	_, err := fmt.Fprintf(w, "\n %s Benchmark Completed.\n"+
		" Class = %s\n"+
		" Size = %s\n"+
		" Iterations = %d\n"+
		" Time in seconds = %.2f\n"+
		" Ranks = %d\n"+
		" Mop/s total = %.2f\n"+
		" Mop/s/rank = %.2f\n"+
		" Operation type = %s\n"+
		" Verification = %s\n",
		r.Name, r.Class, r.Size, r.Iterations, r.Seconds, r.Ranks, r.Mops, perRank, r.OpType, verif)
	if err != nil {
		return err
	}
	for _, l := range r.Extra {
		if _, err := fmt.Fprintf(w, " %s\n", l); err != nil {
			return err
		}
	}
	return nil
}
