package rma

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Binding ranks to cores (GOARMCI_BIND, as mpirun's --bind-to core and srun's --cpu-bind): where
// several ranks of a job share a machine, each with at least one core of its own, and nothing
// bound them already (the process may run on every online CPU), Init binds each rank's process
// to its own share of the CPUs — the i-th of the machine's ranks (rank order) to the i-th of
// as many equal slices of the CPUs it may run on. Two ranks that wait for each other's flags
// then never share a core: unbound, the kernel at times runs both on one, and every wait that
// should be one cache-line transfer becomes a sched_yield round (a 2-rank barrier several times
// slower, bimodally). A rank alone on its machine, ranks that are goroutines of one process
// (tests, simulations), more ranks than CPUs, or a launcher's binding are left as they are. The
// decision is taken once, at Init, from the job's host exchange.

// Go processors of a bound rank. The Go runtime sizes GOMAXPROCS from the CPUs the process may
// run on when it starts, before Init binds it, and follows a later binding only when it next
// checks (after about a second): a rank bound to one core would run with one processor per CPU of
// the machine for its first second and with one after, and its speed would change in between.
// Where Init binds the rank it sets GOMAXPROCS to the CPUs of its share at once, unless the user
// set GOMAXPROCS. One processor per core: a second one on the same core makes every network
// completion a switch between two threads of the core (the tcp reader woken on the second one
// while the waiter polls on the first), twice the latency of a small operation over tcp; with
// one, the waiter's progress call runs the reader on its own thread. The price: as with
// ARMCI over MPI, an operation that needs the target's processor (a Get over tcp from a rank
// that is computing) waits for the target's next call into the runtime, or for the Go
// scheduler's preemption of its computation (some milliseconds); GOMAXPROCS=2 buys back
// asynchronous progress (the role of ARMCI's data server thread) at the latency above.

// tcpProcs decides, once the tcp devices are open, for a rank whose machine has more ranks than
// CPUs (so it is not bound): the only rank of its process (alone), it runs one Go processor
// unless the user set GOMAXPROCS. With two, each tcp frame that a waiting rank's progress call
// hands to its reader may wake a second thread, one more to schedule on cores that every rank
// already competes for (CG class A over tcp, 4 ranks on 2 cores, ran about a fifth faster with
// one).
func (r *Runtime) tcpProcs(alone bool) {
	if len(r.progress) == 0 || r.machineRanks <= runtime.NumCPU() {
		return
	}
	if n := procsFor(1, os.Getenv("GOMAXPROCS")); alone && n > 0 {
		runtime.GOMAXPROCS(n)
	}
}

// procsFor is the GOMAXPROCS a rank that should run share processors (its binding's CPUs, or 1:
// tcpProcs) sets, or 0 to leave it: no share, or the user set GOMAXPROCS (env: its value).
func procsFor(share int, env string) int {
	if share < 1 || env != "" {
		return 0
	}
	return share
}

// cpuShare is the CPUs rank index i of n ranks of a machine is bound to, out of allowed (the
// CPUs the process may run on, ascending), or nil when it is not bound: n < 2, more ranks than
// CPUs, or allowed not every online CPU (online: their number) — a launcher bound it already.
func cpuShare(allowed []int, online, i, n int) []int {
	if n < 2 || i < 0 || i >= n || len(allowed) < n || len(allowed) != online {
		return nil
	}
	lo, hi := i*len(allowed)/n, (i+1)*len(allowed)/n
	return allowed[lo:hi]
}

// bindProcess binds every thread of this process to cpus (threads created later inherit it).
func bindProcess(cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("thread %d: %w", tid, err)
		}
	}
	return nil
}

// allowedCPUs is the CPUs this process may run on, ascending.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, err
	}
	var out []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// onlineCPUs is the number of online CPUs (/sys/devices/system/cpu/online: "0-3,6").
func onlineCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return 0, err
	}
	return cpuListLen(strings.TrimSpace(string(b)))
}

// cpuListLen is the number of CPUs of a kernel CPU list ("0-3,6").
func cpuListLen(s string) (int, error) {
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, fmt.Errorf("cpu list %q: bad range %q", s, part)
			}
		}
		n += b - a + 1
	}
	return n, nil
}

// bindRank applies GOARMCI_BIND at Init: index is this rank's place among the machine's n ranks
// and alone reports whether it is the only rank of its process. A failure to bind is logged and
// changes nothing.
func (r *Runtime) bindRank(index, n int, alone bool) {
	if r.cfg.env.cfg.Bind != "auto" || !alone || r.cfg.NetworkDevice != nil {
		return
	}
	allowed, err := allowedCPUs()
	if err != nil {
		r.log.Debug().Err(err).Msg("rma: bind: affinity")
		return
	}
	online, err := onlineCPUs()
	if err != nil {
		r.log.Debug().Err(err).Msg("rma: bind: online CPUs")
		return
	}
	cpus := cpuShare(allowed, online, index, n)
	if cpus == nil {
		return
	}
	if err := bindProcess(cpus); err != nil {
		r.log.Warn().Err(err).Ints("cpus", cpus).Msg("rma: bind: not bound")
		return
	}
	if n := procsFor(len(cpus), os.Getenv("GOMAXPROCS")); n > 0 {
		runtime.GOMAXPROCS(n)
	}
	r.log.Debug().Ints("cpus", cpus).Int("gomaxprocs", runtime.GOMAXPROCS(0)).Msg("rma: bound to cores")
}
