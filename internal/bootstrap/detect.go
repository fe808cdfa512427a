package bootstrap

import (
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"

	"github.com/goarmci/goarmci/internal/config"
	"github.com/goarmci/goarmci/internal/secret"
)

// Launcher names who started this process.
type Launcher string

const (
	LauncherGoarmci Launcher = "goarmci" // goarmci run
	LauncherSlurm   Launcher = "slurm"   // srun
	LauncherOpenMPI Launcher = "openmpi" // Open MPI mpirun/prterun
	LauncherPMI     Launcher = "pmi"     // a PMI-1 launcher, e.g. MPICH/Hydra mpiexec
	LauncherSingle  Launcher = "single"  // no launcher: rank 0 of 1
)

// Info is what the environment says about this process's place in the job.
type Info struct {
	Launcher Launcher
	Rank     int // this process, in [0, Size)
	Size     int // ranks in the job, ≥ 1
	// LocalRank and LocalSize place the rank among the ranks of its node when the launcher
	// says so; -1 when unknown (Client.Peers is authoritative after Connect).
	LocalRank, LocalSize int
	JobID                string // launcher's job id ("" if none); Slurm: "<job>.<step>"
	Host                 string // host name
	HostID               string // node identity: GOARMCI_HOST_ID, else host name + "/" + boot id
	// RDV is the rendezvous address host:port from GOARMCI_RDV ("" if unset).
	RDV string
	// RDVFile is, under Open MPI without GOARMCI_RDV, the file through which rank 0 hands its
	// rendezvous address to the others (see rdvFilePath; "" otherwise).
	RDVFile string
	// Nodelist is Slurm's SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST) in hostlist syntax.
	Nodelist string
	// PMI is set when a PMI-1 server is reachable (PMI_FD or PMI_PORT); the rendezvous address
	// is then published in its key-value space.
	PMI *PMIEnv
	// Secret is the job's secret from GOARMCI_JOB_SECRET (zero when unset): the rank proves it
	// to the rendezvous, and a rendezvous rank 0 hosts requires it (auth.go).
	Secret secret.Key
}

// PMIEnv locates the PMI-1 server: an inherited socket (FD ≥ 0) or a TCP address (Port).
type PMIEnv struct {
	FD   int    // PMI_FD, -1 if unset
	Port string // PMI_PORT host:port, "" if unset
	ID   string // PMI_ID, sent with PMI_PORT
}

// String gives a one-line summary for logs and errors.
func (i Info) String() string {
	return fmt.Sprintf("launcher %s, rank %d of %d, host %s", i.Launcher, i.Rank, i.Size, i.Host)
}

// Detect reads this process's rank, size, local rank/size, launcher, job id, host and
// rendezvous address from the environment. Order: goarmci run (GOARMCI_RANK/GOARMCI_SIZE),
// Open MPI (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE), Slurm (SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID, SLURM_JOB_ID, SLURM_STEP_ID, SLURM_STEP_NODELIST), PMI-1
// (PMI_RANK, PMI_SIZE, PMI_FD or PMI_PORT), else a single process (rank 0 of 1).
//
// Nested launches: an mpirun or mpiexec started inside a Slurm allocation passes the
// allocation's SLURM_* variables on to its ranks, so those do not name this process. srun never
// sets OMPI_COMM_WORLD_*, so Open MPI's variables win over Slurm's; PMI_* variables win over
// Slurm's when their rank or size differ (mpiexec inside the allocation) and otherwise describe
// the same srun task (srun --mpi=pmi2), reported as Slurm with PMI available.
//
// Under Open MPI without GOARMCI_RDV, Info.RDVFile names the file through which rank 0 hands out
// the rendezvous address: in GOARMCI_RDV_DIR, else <TMPDIR or /tmp>/goarmci-<uid> when every rank
// is on this node (OMPI_COMM_WORLD_LOCAL_SIZE == OMPI_COMM_WORLD_SIZE), else $HOME/.goarmci/rdv;
// named by user id and job id (PMIX_NAMESPACE).
//
// Empty variables count as unset. Errors wrap ErrBadEnv and name the variable: a value that is
// not a number, rank outside [0, size), local rank outside [0, local size), a half-given pair, a
// relative GOARMCI_RDV_DIR, an Open MPI job of several nodes without GOARMCI_RDV_DIR or HOME.
func Detect() (Info, error) {
	return DetectEnv(func(k string) (string, bool) {
		v, ok := os.LookupEnv(k)
		return v, ok && v != ""
	})
}

// DetectEnv is Detect over an explicit lookup function (tests, embedding); lookup reports a
// variable as absent by returning ok == false.
func DetectEnv(lookup func(string) (string, bool)) (Info, error) {
	e := envReader{lookup: lookup}
	info := Info{LocalRank: -1, LocalSize: -1}
	info.Host, _ = os.Hostname()
	info.HostID = hostID(info.Host)
	if v, ok := lookup(config.EnvHostID); ok {
		info.HostID = v
	}
	info.RDV, _ = lookup(config.EnvRDV)
	if info.RDV != "" {
		if err := checkAddr(info.RDV); err != nil {
			return Info{}, fmt.Errorf("%w: %s=%q: %v", ErrBadEnv, config.EnvRDV, info.RDV, err)
		}
	}
	if v, ok := lookup(config.EnvJobSecret); ok {
		k, err := secret.Parse(strings.TrimSpace(v))
		if err != nil {
			return Info{}, fmt.Errorf("%w: %s: %w", ErrBadEnv, config.EnvJobSecret, err)
		}
		info.Secret = k
	}
	pmi, pmiErr := e.pmi()

	switch {
	case e.has(config.EnvRank) || e.has(config.EnvSize):
		info.Launcher = LauncherGoarmci
		info.Rank, info.Size = e.pair(config.EnvRank, config.EnvSize)
		info.LocalRank, info.LocalSize = e.optPair(config.EnvLocalRank, config.EnvLocalSize)
		info.JobID, _ = lookup(config.EnvJobID)
		if info.RDV == "" && e.err == nil && info.Size > 1 {
			e.fail("%s is required with %s (set by goarmci run)", config.EnvRDV, config.EnvRank)
		}
	case e.has("OMPI_COMM_WORLD_RANK") || e.has("OMPI_COMM_WORLD_SIZE"):
		info.Launcher = LauncherOpenMPI
		info.Rank, info.Size = e.pair("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")
		info.LocalRank, info.LocalSize = e.optPair("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE")
		info.JobID = e.first("PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid")
	case e.has("SLURM_PROCID") && !pmiDiffers(&e, pmi):
		info.Launcher = LauncherSlurm
		sizeVar := "SLURM_NTASKS"
		if !e.has(sizeVar) {
			sizeVar = "SLURM_NPROCS"
		}
		info.Rank, info.Size = e.pair("SLURM_PROCID", sizeVar)
		job, step := e.first("SLURM_JOB_ID", "SLURM_JOBID"), e.first("SLURM_STEP_ID", "SLURM_STEPID")
		info.JobID = job
		if step != "" {
			info.JobID = job + "." + step
		}
		info.Nodelist = e.first("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
		if e.has("SLURM_LOCALID") {
			info.LocalRank = e.int("SLURM_LOCALID")
			if tpn := e.first("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"); tpn != "" && e.has("SLURM_NODEID") {
				node := e.int("SLURM_NODEID")
				if counts, err := expandTasksPerNode(tpn); err == nil && node >= 0 && node < len(counts) {
					info.LocalSize = counts[node]
				}
			}
		}
		if pmiErr == nil {
			info.PMI = pmi
		}
	case e.has("PMI_RANK") || e.has("PMI_SIZE"):
		info.Launcher = LauncherPMI
		info.Rank, info.Size = e.pair("PMI_RANK", "PMI_SIZE")
		info.LocalRank, info.LocalSize = e.optPair("MPI_LOCALRANKID", "MPI_LOCALNRANKS")
		info.JobID = e.first("PMI_JOBID")
		if pmiErr != nil {
			e.failErr(pmiErr)
		} else if pmi == nil && info.RDV == "" && e.err == nil && info.Size > 1 {
			e.fail("PMI_RANK is set but neither PMI_FD nor PMI_PORT (and no %s)", config.EnvRDV)
		}
		info.PMI = pmi
	default:
		info.Launcher = LauncherSingle
		info.Rank, info.Size = 0, 1
		info.LocalRank, info.LocalSize = 0, 1
	}
	if e.err != nil {
		return Info{}, e.err
	}
	if info.Size < 1 {
		return Info{}, fmt.Errorf("%w: %s: size %d < 1", ErrBadEnv, info.Launcher, info.Size)
	}
	if info.Rank < 0 || info.Rank >= info.Size {
		return Info{}, fmt.Errorf("%w: %s: rank %d outside [0, %d)", ErrBadEnv, info.Launcher, info.Rank, info.Size)
	}
	if info.LocalSize > info.Size || (info.LocalRank >= 0 && info.LocalSize >= 0 && info.LocalRank >= info.LocalSize) {
		return Info{}, fmt.Errorf("%w: %s: local rank %d of %d, job size %d", ErrBadEnv, info.Launcher,
			info.LocalRank, info.LocalSize, info.Size)
	}
	if info.Launcher == LauncherOpenMPI && info.RDV == "" && info.Size > 1 {
		path, err := rdvFilePath(info, lookup, os.Getuid())
		if err != nil {
			return Info{}, err
		}
		info.RDVFile = path
	}
	return info, nil
}

// pmiDiffers reports whether PMI_RANK/PMI_SIZE are present and disagree with Slurm's values
// (mpiexec inside a Slurm allocation).
func pmiDiffers(e *envReader, _ *PMIEnv) bool {
	if !e.has("PMI_RANK") && !e.has("PMI_SIZE") {
		return false
	}
	probe := envReader{lookup: e.lookup}
	sizeVar := "SLURM_NTASKS"
	if !probe.has(sizeVar) {
		sizeVar = "SLURM_NPROCS"
	}
	sr, ss := probe.pair("SLURM_PROCID", sizeVar)
	pr, ps := probe.pair("PMI_RANK", "PMI_SIZE")
	return probe.err == nil && (sr != pr || ss != ps)
}

// envReader reads numbers from the environment and keeps the first error.
type envReader struct {
	lookup func(string) (string, bool)
	err    error
}

func (e *envReader) has(k string) bool { _, ok := e.lookup(k); return ok }

func (e *envReader) first(keys ...string) string {
	for _, k := range keys {
		if v, ok := e.lookup(k); ok {
			return v
		}
	}
	return ""
}

func (e *envReader) fail(format string, a ...any) {
	if e.err == nil {
		e.err = fmt.Errorf("%w: "+format, append([]any{ErrBadEnv}, a...)...)
	}
}

func (e *envReader) failErr(err error) {
	if e.err == nil {
		e.err = err
	}
}

func (e *envReader) int(k string) int {
	v, ok := e.lookup(k)
	if !ok {
		e.fail("%s is not set", k)
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		e.fail("%s=%q is not a non-negative integer", k, v)
		return -1
	}
	return n
}

// pair reads a required (rank, size) pair.
func (e *envReader) pair(rk, sk string) (int, int) {
	if !e.has(rk) || !e.has(sk) {
		e.fail("%s and %s must both be set", rk, sk)
		return -1, -1
	}
	return e.int(rk), e.int(sk)
}

// optPair reads an optional (local rank, local size) pair; -1 for what is absent.
func (e *envReader) optPair(rk, sk string) (int, int) {
	r, s := -1, -1
	if e.has(rk) {
		r = e.int(rk)
	}
	if e.has(sk) {
		s = e.int(sk)
	}
	return r, s
}

// pmi reads PMI_FD / PMI_PORT / PMI_ID; nil when neither is set.
func (e *envReader) pmi() (*PMIEnv, error) {
	p := &PMIEnv{FD: -1}
	if v, ok := e.lookup("PMI_FD"); ok {
		fd, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || fd < 0 {
			return nil, fmt.Errorf("%w: PMI_FD=%q is not a file descriptor", ErrBadEnv, v)
		}
		p.FD = fd
	}
	if v, ok := e.lookup("PMI_PORT"); ok {
		if err := checkAddr(v); err != nil {
			return nil, fmt.Errorf("%w: PMI_PORT=%q: %v", ErrBadEnv, v, err)
		}
		p.Port = v
	}
	p.ID, _ = e.lookup("PMI_ID")
	if p.FD < 0 && p.Port == "" {
		return nil, nil
	}
	return p, nil
}

// slurmPort derives the rendezvous port of a Slurm job step from its job and step ids: the
// same on every rank, in [20000, 32000) (below Linux's ephemeral range).
func slurmPort(jobID string) int {
	h := fnv.New32a()
	h.Write([]byte(jobID))
	return 20000 + int(h.Sum32()%12000)
}

// hostID is host name + "/" + boot id: equal on ranks that can share memory.
func hostID(host string) string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return host
	}
	return host + "/" + strings.TrimSpace(string(b))
}
