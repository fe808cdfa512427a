package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goarmci/goarmci/bench"
	"github.com/goarmci/goarmci/bench/progress"
)

// npbUsage is the usage text of goarmci bench npb.
const npbUsage = `usage: goarmci bench npb -npb-dir DIR [flags]

Runs goarmci's NAS kernels (examples/nas/cg, is, mg and ft, on Global Arrays) beside the
NPB-MPI programs in DIR (NPB 3.4 names them cg.A.x, is.B.x; NPB 3.3's cg.A.4 is also taken),
for each kernel, class, transport and rank count, runs alternating between the two, and prints
per row the median, min and max of "Time in seconds" over the runs and goarmci's ratio to
NPB-MPI (below 1 = goarmci faster). The project ships no NPB code: build NPB 3.4 MPI yourself.

goarmci's kernels are built from the source tree goarmci was built from (go build, into a
temporary directory) unless -cg, -is, -mg or -ft name built ones. Transport shm:
GOARMCI_TRANSPORT=shm and mpirun --mca btl self,vader; tcp: GOARMCI_TRANSPORT=tcp and mpirun
--mca btl self,tcp.

  goarmci bench npb -npb-dir ~/NPB3.4-MPI/bin -kernels cg,is -classes A,B -np 1,2,4 -runs 5
  goarmci bench npb -npb-dir ~/NPB3.4-MPI/bin -kernels cg -classes A -np 2,4 -transport tcp
  goarmci bench npb -npb-dir ~/NPB3.4-MPI/bin -kernels mg,ft -classes A -np 1,2,4

Flags:
`

// npbKernels are the NAS kernels of examples/nas that bench npb runs, by NPB's program names.
var npbKernels = []string{"cg", "is", "mg", "ft"}

// npbFlags are the command line of goarmci bench npb.
type npbFlags struct {
	dir, kernels, classes, np, transport string
	mpirun, format                       string
	built                                map[string]*string // kernel → -cg, -is, -mg, -ft
	runs                                 int
	timeout                              time.Duration
}

// npbRow is one row of the table: a kernel, class, transport and rank count.
type npbRow struct {
	kernel, class, transport string
	np                       int
}

func (r npbRow) key() string {
	return fmt.Sprintf("%s class %s, %s, np %d", strings.ToUpper(r.kernel), r.class, r.transport, r.np)
}

func runNPB(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	f := npbFlags{built: make(map[string]*string, len(npbKernels))}
	fs := flag.NewFlagSet("goarmci bench npb", flag.ContinueOnError)
	fs.SetOutput(stderr)
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(stdout)
		}
	}
	fs.StringVar(&f.dir, "npb-dir", "", "directory of the NPB-MPI executables (cg.A.x, is.B.x, ...)")
	fs.StringVar(&f.kernels, "kernels", "cg,is", "comma list of kernels: "+strings.Join(npbKernels, ", "))
	fs.StringVar(&f.classes, "classes", "A", "comma list of classes: S, W, A, B")
	fs.StringVar(&f.np, "np", "1,2,4", "comma list of rank counts")
	fs.StringVar(&f.transport, "transport", "shm", "comma list of transports: shm, tcp")
	fs.IntVar(&f.runs, "runs", 5, "runs of each system per row (medians are printed)")
	for _, k := range npbKernels {
		f.built[k] = fs.String(k, "", fmt.Sprintf("goarmci's %s kernel, built (default: go build ./examples/nas/%s)", strings.ToUpper(k), k))
	}
	fs.StringVar(&f.mpirun, "mpirun", "mpirun.openmpi", "Open MPI launcher of the NPB-MPI programs")
	fs.StringVar(&f.format, "format", "text", "text, csv or json")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Minute, "wall-clock limit of each run")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), npbUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError("bench npb: %v", err)
	}
	if fs.NArg() > 0 {
		return usageError("bench npb: unexpected %q", fs.Args())
	}
	rows, err := f.rows()
	if err != nil {
		return err
	}
	switch f.format {
	case "text", "osu", "csv", "json":
	default:
		return usageError("bench npb: -format %q (want text, csv or json)", f.format)
	}
	if f.runs < 1 {
		return usageError("bench npb: -runs must be positive")
	}
	if f.dir == "" {
		return usageError("bench npb: -npb-dir DIR of the NPB-MPI executables is required (the project ships no NPB)")
	}
	kernels, cleanup, err := f.goarmciKernels(ctx, stderr, rows)
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("bench npb: %w", err)}
	}
	defer cleanup()
	mpirun, err := exec.LookPath(f.mpirun)
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("bench npb: %s: %w (apt-get install openmpi-bin)", f.mpirun, err)}
	}
	tab := &bench.Table{
		Name: "npb", Title: "# NAS Parallel Benchmarks - goarmci's kernels (Global Arrays) vs NPB-MPI", Key: "Kernel",
		Header: []string{
			fmt.Sprintf("Figure: Time in seconds of the NPB report, median of %d runs per system, runs alternating; min and max over the runs", f.runs),
			"Ratio: goarmci / NPB-MPI, of the medians (below 1 = goarmci faster)",
			"goarmci: " + strings.Join(f.kernelDocs(kernels), ", ") + " under goarmci's launcher (GOARMCI_TRANSPORT=shm|tcp)",
			"NPB-MPI: " + filepath.Join(f.dir, "<kernel>.<class>.x") + " under " + mpiDoc(ctx, mpirun) + " --oversubscribe --mca btl self,vader (shm) | self,tcp (tcp)",
		},
		Columns: []string{"goarmci (s)", "goarmci min", "goarmci max", "NPB-MPI (s)", "NPB-MPI min", "NPB-MPI max", "goarmci/NPB-MPI"},
		Run:     bench.CurrentRun(),
	}
	for _, r := range rows {
		tab.Rows = append(tab.Rows, f.measure(ctx, stderr, r, kernels[r.kernel], mpirun))
	}
	return tab.Write(stdout, f.format)
}

// rows expands the lists of the flags into the table's rows, kernel-major.
func (f *npbFlags) rows() ([]npbRow, error) {
	var rows []npbRow
	split := func(s string) []string {
		var out []string
		for _, v := range strings.Split(s, ",") {
			if v = strings.TrimSpace(v); v != "" {
				out = append(out, v)
			}
		}
		return out
	}
	var nps []int
	for _, v := range split(f.np) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, usageError("bench npb: -np %q (want a comma list of positive counts)", f.np)
		}
		nps = append(nps, n)
	}
	for _, k := range split(f.kernels) {
		k = strings.ToLower(k)
		if !slices.Contains(npbKernels, k) {
			return nil, usageError("bench npb: kernel %q (have %s)", k, strings.Join(npbKernels, ", "))
		}
		for _, c := range split(f.classes) {
			c = strings.ToUpper(c)
			if !strings.Contains("SWAB", c) || len(c) != 1 {
				return nil, usageError("bench npb: class %q (have S, W, A, B)", c)
			}
			for _, t := range split(f.transport) {
				if t != "shm" && t != "tcp" {
					return nil, usageError("bench npb: -transport %q (want shm or tcp)", t)
				}
				for _, n := range nps {
					rows = append(rows, npbRow{kernel: k, class: c, transport: t, np: n})
				}
			}
		}
	}
	if len(rows) == 0 {
		return nil, usageError("bench npb: no kernel, class, transport or rank count")
	}
	return rows, nil
}

// measure runs one row, alternating goarmci's kernel and the NPB-MPI program, and returns its
// medians, ranges and ratio (NaN for a system that did not run).
func (f *npbFlags) measure(ctx context.Context, stderr io.Writer, r npbRow, kernel, mpirun string) bench.TableRow {
	nan := math.NaN()
	row := bench.TableRow{Key: r.key(), Values: []float64{nan, nan, nan, nan, nan, nan, nan}}
	systems := []bench.System{{Name: "goarmci", Run: func(ctx context.Context) (*bench.Result, error) {
		var out, errb bytes.Buffer
		j := &job{np: r.np, exe: kernel, args: []string{"-class", r.class}, env: os.Environ(), transport: r.transport,
			timeout: f.timeout, grace: 3 * time.Second, stdout: &out, stderr: &errb}
		if code := j.run(ctx); code != 0 {
			return nil, fmt.Errorf("exit code %d: %s", code, lastLinesOf(errb.String()+out.String(), 4))
		}
		return npbResult(out.String(), r.np)
	}}}
	exe := npbExe(f.dir, r)
	if exe == "" {
		fmt.Fprintf(stderr, "goarmci: bench npb: %s: no %s.%s.x (or %s.%s.%d) in %s; goarmci alone\n", r.key(), r.kernel, r.class, r.kernel, r.class, r.np, f.dir)
	} else {
		systems = append(systems, bench.System{Name: "NPB-MPI", Run: func(ctx context.Context) (*bench.Result, error) {
			args := []string{"--oversubscribe", "--mca", "btl", map[string]string{"shm": "self,vader", "tcp": "self,tcp"}[r.transport], "-np", strconv.Itoa(r.np), exe}
			ctx, cancel := context.WithTimeout(ctx, f.timeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, mpirun, args...)
			cmd.Env = os.Environ()
			if os.Geteuid() == 0 {
				cmd.Env = append(cmd.Env, "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
			}
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				return nil, fmt.Errorf("%w: %s", err, lastLinesOf(errb.String()+out.String(), 4))
			}
			return npbResult(out.String(), r.np)
		}})
	}
	prog := progress.New(stderr, "goarmci: bench npb "+r.key(), "runs", f.runs*len(systems))
	smp, err := bench.Alternate(ctx, r.key(), systems, f.runs, prog.Writer(stderr), prog)
	prog.End()
	if err != nil {
		fmt.Fprintf(stderr, "goarmci: bench npb: %v\n", err)
		return row
	}
	for i := range systems {
		if smp.Failed[i] {
			continue
		}
		v := smp.Vals[i][r.np]
		lo, hi := bench.Range(v)
		copy(row.Values[3*i:], []float64{bench.Median(v), lo, hi})
	}
	if !math.IsNaN(row.Values[3]) {
		row.Values[6] = bench.Ratio(row.Values[0], row.Values[3])
	}
	return row
}

// npbResult turns one NPB report into a one-row result keyed by the rank count; a report
// without a time or that failed its verification is an error.
func npbResult(out string, np int) (*bench.Result, error) {
	rep := bench.ParseNPB(out)
	if !rep.Found {
		return nil, fmt.Errorf("no \"Time in seconds =\" line: %s", lastLinesOf(out, 4))
	}
	if !rep.Verified {
		return nil, fmt.Errorf("verification failed (%.2f s)", rep.Seconds)
	}
	return &bench.Result{Columns: []string{"Time (s)"}, Rows: []bench.Row{{Size: np, Values: []float64{rep.Seconds}}}}, nil
}

// npbExe finds the NPB-MPI program of a row: NPB 3.4's cg.A.x, else NPB 3.3's cg.A.4.
func npbExe(dir string, r npbRow) string {
	for _, n := range []string{fmt.Sprintf("%s.%s.x", r.kernel, r.class), fmt.Sprintf("%s.%s.%d", r.kernel, r.class, r.np)} {
		p := filepath.Join(dir, n)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// goarmciKernels returns the executables of goarmci's kernels of the rows: -cg, -is, -mg, -ft,
// else built with go build from the module source goarmci was built from into a temporary
// directory (removed by the cleanup).
func (f *npbFlags) goarmciKernels(ctx context.Context, stderr io.Writer, rows []npbRow) (map[string]string, func(), error) {
	out := make(map[string]string, len(npbKernels))
	cleanup := func() {}
	var missing []string
	for _, k := range npbKernels {
		if !slices.ContainsFunc(rows, func(r npbRow) bool { return r.kernel == k }) {
			continue
		}
		if out[k] = *f.built[k]; out[k] == "" {
			missing = append(missing, k)
		} else if abs, err := filepath.Abs(out[k]); err == nil {
			out[k] = abs
		}
	}
	if len(missing) == 0 {
		return out, cleanup, nil
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(filepath.Dir(file))) // .../cmd/goarmci/npb.go -> module root
	if _, err := os.Stat(filepath.Join(root, "examples", "nas", "cg", "main.go")); err != nil || !filepath.IsAbs(root) {
		return nil, cleanup, fmt.Errorf("no source tree of goarmci here to build the NAS kernels from: give -cg, -is, -mg, -ft (go build ./examples/nas/cg ... in a clone)")
	}
	tmp, err := os.MkdirTemp("", "goarmci-npb-")
	if err != nil {
		return nil, cleanup, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	for _, k := range missing {
		out[k] = filepath.Join(tmp, k)
		fmt.Fprintf(stderr, "goarmci: bench npb: go build -o %s ./examples/nas/%s (in %s)\n", out[k], k, root)
		cmd := exec.CommandContext(ctx, goTool(), "build", "-o", out[k], "./examples/nas/"+k)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			cleanup()
			return nil, func() {}, fmt.Errorf("go build ./examples/nas/%s: %w: %s", k, err, lastLinesOf(string(b), 5))
		}
	}
	return out, cleanup, nil
}

// kernelDocs names goarmci's kernels: the -cg, -is, -mg, -ft paths, or how they were built.
func (f *npbFlags) kernelDocs(kernels map[string]string) []string {
	var out []string
	for _, k := range npbKernels {
		switch {
		case *f.built[k] != "":
			out = append(out, k+" = "+kernels[k])
		case kernels[k] != "":
			out = append(out, k+" = go build ./examples/nas/"+k)
		}
	}
	return out
}

// mpiDoc names the launcher and its library version ("mpirun.openmpi (Open MPI 4.1.4)").
func mpiDoc(ctx context.Context, mpirun string) string {
	b, err := exec.CommandContext(ctx, mpirun, "--version").CombinedOutput()
	name := filepath.Base(mpirun)
	if err == nil {
		first := strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
		if _, v, ok := strings.Cut(first, ") "); ok {
			return name + " (Open MPI " + strings.TrimSpace(v) + ")"
		}
	}
	return name
}

func lastLinesOf(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
