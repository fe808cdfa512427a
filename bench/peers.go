package bench

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// peerSources are the C peers, built on demand by FindPeers (never by go test).
//
//go:embed peers/*.c peers/*.h peers/Makefile
var peerSources embed.FS

// Peer is one C program of bench/peers under its MPI launcher: the same benchmark definitions
// run with MPI-3 RMA (Open MPI, MPICH; allocated or created windows) or Global Arrays/ARMCI.
type Peer struct {
	Name     string   // "openmpi-allocate", "mpich-create", "ga", "armci", ...
	launcher []string // mpirun and its options, up to and excluding -np
	exe      string
	args     []string // fixed arguments after the benchmark name (-win create)
	env      []string // added to the environment
	// doc says what the peer is, for the header of a comparison: the library and its version,
	// the one-sided component and the launcher options that select it, the window creation.
	doc     string
	names   []string // benchmarks it implements
	syncs   []Sync   // synchronizations it implements
	tcpArgs []string // launcher options forcing the network path between ranks of one host
	shmOnly bool     // a shared-memory path only: no run with transport tcp
	// busyPolls: its ranks wait by polling without yielding the core (MPICH's ch3), so with more
	// ranks than cores each wait lasts until the scheduler preempts the poller
	busyPolls bool
}

// BusyPolls reports whether the peer's ranks wait without yielding their core: with more ranks
// than cores its runs take minutes (MPICH: a 4-rank barrier on 2 cores took 4.9 ms).
func (p Peer) BusyPolls() bool { return p.busyPolls }

// Oversubscribed splits peers for a job of np ranks on a machine of cpus cores: with more ranks
// than cores the busy-polling ones (BusyPolls) go to left, the others to keep.
func Oversubscribed(peers []Peer, np, cpus int) (keep, left []Peer) {
	for _, p := range peers {
		if np > cpus && p.busyPolls {
			left = append(left, p)
		} else {
			keep = append(keep, p)
		}
	}
	return keep, left
}

// Supports reports whether the peer implements benchmark name.
func (p Peer) Supports(name string) bool { return slices.Contains(p.names, name) }

// Describe is the peer's doc and, with transport tcp, the launcher options and environment
// that put its ranks on the network path.
func (p Peer) Describe(transport string) string {
	if transport != "tcp" {
		return p.doc
	}
	if tcp := strings.Join(p.tcpArgs, " "); tcp != "" {
		return p.doc + "; over tcp with " + tcp
	}
	return p.doc
}

// ShmOnly reports whether the peer runs over shared memory only (ErrShmOnly with tcp).
func (p Peer) ShmOnly() bool { return p.shmOnly }

// ErrShmOnly: the peer has no network path between ranks (MPICH on one host; Open MPI's osc/sm
// and osc/rdma over the vader shared-memory transport).
var ErrShmOnly = errors.New("bench: peer runs over shared memory only")

var oneSidedNames = []string{"put_latency", "get_latency", "put_bw", "get_bw", "put_bibw", "acc_latency", "fop_latency", "cas_latency", "get_acc_latency"}

// Run runs the peer once with np ranks and returns its table (rank 0's OSU text, parsed).
// transport "tcp" asks the MPI library for its network path between local ranks.
func (p Peer) Run(ctx context.Context, o Options, np int, transport string) (*Result, error) {
	o, _, err := o.Check()
	if err != nil {
		return nil, err
	}
	if len(p.syncs) > 0 && !slices.Contains(p.syncs, o.Sync) {
		return nil, fmt.Errorf("%w: peer %s with -sync %s", ErrSync, p.Name, o.Sync)
	}
	if transport == "tcp" && p.shmOnly {
		return nil, fmt.Errorf("%w: %s", ErrShmOnly, p.Name)
	}
	args := append([]string{}, p.launcher[1:]...)
	env := append(os.Environ(), p.env...)
	if transport == "tcp" {
		args = append(args, p.tcpArgs...)
	}
	args = append(args, "-np", strconv.Itoa(np), p.exe, o.Name)
	args = append(args, p.args...)
	if strings.HasPrefix(p.Name, "openmpi") || strings.HasPrefix(p.Name, "mpich") {
		args = append(args, "-sync", string(o.Sync))
	}
	for _, kv := range []struct {
		k string
		v int
	}{{"-min-size", o.MinSize}, {"-max-size", o.MaxSize}, {"-iterations", o.Iterations}, {"-skip", o.Skip}, {"-window", o.Window}} {
		if kv.v > 0 {
			args = append(args, kv.k, strconv.Itoa(kv.v))
		}
	}
	cmd := exec.CommandContext(ctx, p.launcher[0], args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("bench: peer %s: %w: %s", p.Name, err, lastLines(errb.String(), 5))
	}
	res, err := ParseOSU(&out)
	if err != nil {
		return nil, fmt.Errorf("bench: peer %s: %w", p.Name, err)
	}
	res.Name = o.Name
	return res, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// FindPeers builds the C peers into dir (sources written from the binary, rebuilt when they
// changed) with every MPI compiler and library found here and returns the peers that built,
// plus one note per peer that could not be (missing compiler, library, or a build error). It
// never fails: without compilers there are simply no peers.
//
// Looked for: mpicc.openmpi + mpirun.openmpi (Debian openmpi-bin, libopenmpi-dev), mpicc.mpich +
// mpirun.mpich (mpich, libmpich-dev), and Global Arrays 5.8 over ARMCI-MPI for Open MPI
// (libglobalarrays-dev, libarmci-mpi-dev, libscalapack-openmpi-dev, liblapack-dev, libblas-dev).
func FindPeers(ctx context.Context, dir string) ([]Peer, []string) {
	var notes []string
	src := filepath.Join(dir, "src")
	if err := writeSources(src); err != nil {
		return nil, []string{"peers: " + err.Error()}
	}
	root := os.Geteuid() == 0
	var peers []Peer
	type mpi struct {
		name, cc, run string
		launch        []string
		env           []string
		tcpArgs       []string
		busyPolls     bool
		shmOnly       bool
	}
	// MPICH runs shared memory only: on one host Debian's MPICH 4.0 (ch3:nemesis) keeps its
	// shared-memory path whatever MPIR_CVAR_CH3_NOLOCAL / MPIR_CVAR_NOLOCAL say (a 2-rank
	// "tcp" barrier took 0.24–0.32 µs, a put 0.46 µs), so its columns would be shared memory
	// under a tcp heading.
	mpis := []mpi{
		{name: "openmpi", cc: "mpicc.openmpi", run: "mpirun.openmpi", launch: []string{"--oversubscribe"},
			tcpArgs: []string{"--mca", "btl", "self,tcp", "--mca", "osc", "pt2pt"}},
		{name: "mpich", cc: "mpicc.mpich", run: "mpirun.mpich", busyPolls: true, shmOnly: true},
	}
	for _, m := range mpis {
		cc, err1 := exec.LookPath(m.cc)
		run, err2 := exec.LookPath(m.run)
		if err1 != nil || err2 != nil {
			notes = append(notes, fmt.Sprintf("peer %s: %s or %s not found (apt-get install %s)", m.name, m.cc, m.run, map[string]string{"openmpi": "libopenmpi-dev openmpi-bin", "mpich": "libmpich-dev mpich"}[m.name]))
			continue
		}
		env := m.env
		if m.name == "openmpi" && root {
			env = append(env, "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
		}
		exe := filepath.Join(dir, "mpi_rma-"+m.name)
		if err := build(ctx, exe, cc, []string{filepath.Join(src, "mpi_rma.c")}, nil); err != nil {
			notes = append(notes, fmt.Sprintf("peer %s: build: %v", m.name, err))
			continue
		}
		lib := mpiVersion(ctx, run, m.name)
		for _, win := range []string{"allocate", "create"} {
			peers = append(peers, Peer{
				Name: m.name + "-" + win, launcher: append([]string{run}, m.launch...), exe: exe,
				args: []string{"-win", win}, env: env, names: oneSidedNames,
				doc:     lib + ", MPI_Win_" + win + ", the library's choice of one-sided component",
				tcpArgs: m.tcpArgs, busyPolls: m.busyPolls, shmOnly: m.shmOnly,
			})
		}
		peers = append(peers, Peer{
			Name: m.name, launcher: append([]string{run}, m.launch...), exe: exe, env: env,
			names: []string{"barrier", "allreduce"}, doc: lib + ", MPI_Barrier (barrier), MPI_Allreduce (allreduce)",
			tcpArgs: m.tcpArgs, busyPolls: m.busyPolls, shmOnly: m.shmOnly,
		})
		if m.name != "openmpi" {
			continue
		}
		// Open MPI's two shared-memory one-sided components as columns of their own: --mca osc X
		// leaves only X to the osc framework, so a window X cannot serve fails instead of falling
		// back to another component (osc/sm serves no MPI_Win_create window, osc/rdma needs a
		// transport with RDMA put/get: vader, not tcp).
		for _, osc := range []string{"sm", "rdma"} {
			mca := []string{"--mca", "osc", osc, "--mca", "btl", "self,vader"}
			peers = append(peers, Peer{
				Name: m.name + "-" + osc, launcher: append(append([]string{run}, m.launch...), mca...), exe: exe,
				args: []string{"-win", "allocate"}, env: env, names: oneSidedNames, shmOnly: true,
				doc: lib + ", osc " + osc + " (" + strings.Join(mca, " ") + "), MPI_Win_allocate",
			})
		}
		gacfg := "/usr/lib/x86_64-linux-gnu/ga/openmpi/bin/ga-config"
		libs, err := exec.CommandContext(ctx, gacfg, "--libs").Output()
		if err != nil {
			notes = append(notes, "peer ga: Global Arrays for Open MPI not found (apt-get install libglobalarrays-dev libarmci-mpi-dev libscalapack-openmpi-dev liblapack-dev libblas-dev)")
			continue
		}
		gaExe := filepath.Join(dir, "ga_bench-openmpi")
		ldflags := append(strings.Fields(string(libs)), "-lgfortran", "-lm")
		if err := build(ctx, gaExe, cc, []string{filepath.Join(src, "ga_bench.c")}, ldflags); err != nil {
			notes = append(notes, fmt.Sprintf("peer ga: build: %v", err))
			continue
		}
		launch := append([]string{run}, m.launch...)
		// GA_Dgemm's dgemm_ comes from -lblas: libblas.so.3, a Debian alternative (reference
		// BLAS or OpenBLAS), named in the header of a comparison.
		blasDoc := ""
		if p, err := filepath.EvalSymlinks("/usr/lib/x86_64-linux-gnu/libblas.so.3"); err == nil {
			blasDoc = "; GA_Dgemm's BLAS: libblas.so.3 = " + p
		}
		peers = append(peers,
			Peer{Name: "ga", launcher: launch, exe: gaExe, env: env, names: append(slices.Clone(GASuite), "barrier", "allreduce"), tcpArgs: m.tcpArgs,
				doc: "Global Arrays over ARMCI-MPI on " + lib + " (barrier: GA_Sync; allreduce: GA_Dgop" + blasDoc + ")"},
			Peer{Name: "armci", launcher: launch, exe: gaExe, env: env, syncs: []Sync{SyncFlush},
				names: []string{"put_latency", "get_latency", "put_bw", "get_bw", "acc_latency", "fop_latency"}, tcpArgs: m.tcpArgs,
				doc: "ARMCI-MPI of Global Arrays on " + lib + ", ARMCI_Malloc, ARMCI_Fence"},
		)
	}
	return peers, notes
}

// mpiVersion names the MPI library of launcher run ("Open MPI 4.1.4", "MPICH 4.0.2"), from its
// --version output ("Version:" of MPICH's Hydra); the family name alone when that says nothing usable.
func mpiVersion(ctx context.Context, run, family string) string {
	name := map[string]string{"openmpi": "Open MPI", "mpich": "MPICH"}[family]
	out, err := exec.CommandContext(ctx, run, "--version").CombinedOutput()
	if err != nil {
		return name
	}
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if _, v, ok := strings.Cut(l, "(OpenRTE) "); ok { // "mpirun.openmpi (OpenRTE) 4.1.4"
			return name + " " + strings.TrimSpace(v)
		}
		if _, v, ok := strings.Cut(l, "(Open MPI) "); ok {
			return name + " " + strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "Version:"); ok {
			return name + " " + strings.TrimSpace(v)
		}
	}
	return name
}

// writeSources writes the embedded C sources into dir, leaving files with equal content alone
// (so their binaries are not rebuilt).
func writeSources(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ents, err := peerSources.ReadDir("peers")
	if err != nil {
		return err
	}
	for _, e := range ents {
		b, err := peerSources.ReadFile("peers/" + e.Name())
		if err != nil {
			return err
		}
		p := filepath.Join(dir, e.Name())
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, b) {
			continue
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// build compiles srcs into exe with cc unless exe is newer than every source and common.h.
func build(ctx context.Context, exe, cc string, srcs, ldflags []string) error {
	deps := append([]string{filepath.Join(filepath.Dir(srcs[0]), "common.h")}, srcs...)
	if st, err := os.Stat(exe); err == nil {
		fresh := true
		for _, d := range deps {
			if ds, err := os.Stat(d); err != nil || ds.ModTime().After(st.ModTime()) {
				fresh = false
			}
		}
		if fresh {
			return nil
		}
	}
	args := append([]string{"-O2", "-o", exe}, srcs...)
	args = append(args, ldflags...)
	out, err := exec.CommandContext(ctx, cc, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", cc, err, lastLines(string(out), 5))
	}
	return nil
}
