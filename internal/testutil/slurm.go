package testutil

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Slurm is a private single-node Slurm cluster on this machine: munged with its own key and
// socket, slurmctld and slurmd, all started by the test from a slurm.conf in a directory of their
// own, at free ports, and stopped when the test ends.
type Slurm struct {
	Dir  string // configuration, state, spool directories, logs and munge's socket
	Conf string // slurm.conf
	Node string // the node's name: this host's short name
}

// slurmTools are the programs StartSlurm needs, with the package that installs each one.
var slurmTools = [][2]string{{"munged", "munge"}, {"slurmctld", "slurmctld"}, {"slurmd", "slurmd"},
	{"srun", "slurm-client"}, {"sinfo", "slurm-client"}, {"squeue", "slurm-client"}, {"scancel", "slurm-client"}}

// StartSlurm starts a single-node cluster whose node has cpus CPUs (oversubscribed: more than
// the machine has is fine) in one partition, "test", and waits, bounded by ctx, until the node is
// idle. It skips the test, with the reason, when not root, when a program of Slurm or munge is
// not installed, or when the daemons do not start. When the test ends it cancels what is left of
// the cluster's jobs, stops the daemons and fails the test if a process of the cluster is left.
func StartSlurm(ctx context.Context, t testing.TB, cpus int) *Slurm {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a private Slurm runs its daemons as root (SlurmUser=root): not root")
	}
	paths := map[string]string{}
	for _, tool := range slurmTools {
		p, err := lookSbin(tool[0])
		if err != nil {
			t.Skipf("Slurm not installed: no %s (apt-get install --no-install-recommends slurmctld slurmd slurm-client munge)", tool[0])
		}
		paths[tool[0]] = p
	}
	host, err := os.Hostname()
	if err != nil {
		t.Skipf("no host name for the Slurm node: %v", err)
	}
	host, _, _ = strings.Cut(host, ".") // slurmd names its node by the short host name
	if _, err := net.DefaultResolver.LookupHost(ctx, host); err != nil {
		t.Skipf("this host's name %q does not resolve (slurmctld's address, and the rendezvous host of a step): %v", host, err)
	}

	dir, err := os.MkdirTemp("", "goarmci-slurm-")
	if err == nil && len(dir) > 80 { // unix socket paths (munge's, slurmd's) are limited to 107 bytes
		_ = os.Remove(dir)
		dir, err = os.MkdirTemp("/tmp", "goarmci-slurm-")
	}
	if err != nil {
		t.Fatalf("slurm: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s := &Slurm{Dir: dir, Conf: filepath.Join(dir, "slurm.conf"), Node: host}
	for _, d := range []string{"state", "spool"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatalf("slurm: %v", err)
		}
	}

	// munged with a fresh key. -f: munged refuses to keep its PRNG state in /var/lib/munge, which
	// belongs to the munge user, when it runs as root; forced, it warns and keeps it in memory.
	key := make([]byte, 1024)
	_, _ = rand.Read(key)
	keyFile, sock := filepath.Join(dir, "munge.key"), filepath.Join(dir, "munge.socket")
	if err := os.WriteFile(keyFile, key, 0o400); err != nil {
		t.Fatalf("slurm: %v", err)
	}
	munged := s.start(t, paths["munged"], "-F", "-f", "--socket="+sock, "--key-file="+keyFile,
		"--log-file="+filepath.Join(dir, "munged.log"), "--pid-file="+filepath.Join(dir, "munged.pid"))
	s.waitFor(ctx, t, "munged's socket", []*daemon{munged}, func() bool {
		_, err := os.Stat(sock)
		return err == nil
	})

	ports := freePorts(t, 2)
	conf := fmt.Sprintf(`ClusterName=goarmcitest
SlurmctldHost=%[1]s
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=%[2]s
CredType=cred/munge
SlurmctldPort=%[3]d
SlurmdPort=%[4]d
StateSaveLocation=%[5]s/state
SlurmdSpoolDir=%[5]s/spool
SlurmctldPidFile=%[5]s/slurmctld.pid
SlurmdPidFile=%[5]s/slurmd.pid
SlurmctldLogFile=%[5]s/slurmctld.log
SlurmdLogFile=%[5]s/slurmd.log
FirstJobId=%[6]d
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
NodeName=%[1]s CPUs=%[7]d Sockets=1 CoresPerSocket=%[7]d ThreadsPerCore=1 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES OverSubscribe=FORCE MaxTime=INFINITE State=UP
`, host, sock, ports[0], ports[1], dir, 1000+os.Getpid()%1000000, cpus)
	// FirstJobId: a step's rendezvous port derives from its job and step ids, so two clusters
	// started at once on this machine must not both count jobs from 1. config_overrides: the node
	// has the CPUs configured here, not the machine's.
	if err := os.WriteFile(s.Conf, []byte(conf), 0o644); err != nil {
		t.Fatalf("slurm: %v", err)
	}
	ctld := s.start(t, paths["slurmctld"], "-D", "-f", s.Conf)
	slurmd := s.start(t, paths["slurmd"], "-D", "-f", s.Conf)
	t.Cleanup(func() { s.drain(t, paths) })
	s.waitFor(ctx, t, "node "+host+" idle", []*daemon{munged, ctld, slurmd}, func() bool {
		out, _ := s.Command(ctx, paths["sinfo"], "-h", "-N", "-n", host, "-o", "%T").Output()
		return strings.TrimSpace(string(out)) == "idle"
	})
	return s
}

// Env is the environment of a Slurm client of this cluster: this process's without the variables
// of a launcher or of goarmci (GOARMCI_*, SLURM_*, OMPI_*, PMI_*, PMIX_*), with SLURM_CONF.
func (s *Slurm) Env() []string { return append(CleanEnv(), "SLURM_CONF="+s.Conf) }

// Command is a Slurm client (srun, sinfo, ...) of this cluster, with Env.
func (s *Slurm) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, name, args...)
	c.Env = s.Env()
	return c
}

// daemon is a started daemon; done is closed once it exited.
type daemon struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// start starts a daemon in the foreground, its output in <dir>/<name>.out, and stops it when the
// test ends: SIGTERM, then SIGKILL if it has not exited 20 s later (a hang guard).
func (s *Slurm) start(t testing.TB, path string, args ...string) *daemon {
	t.Helper()
	d := &daemon{name: filepath.Base(path), done: make(chan struct{})}
	d.log = filepath.Join(s.Dir, d.name+".out")
	f, err := os.Create(d.log)
	if err != nil {
		t.Fatalf("slurm: %v", err)
	}
	defer f.Close()
	d.cmd = exec.Command(path, args...) // not bound to a context: stopped by the cleanup below
	d.cmd.Env = s.Env()
	d.cmd.Stdout, d.cmd.Stderr = f, f
	if err := d.cmd.Start(); err != nil {
		t.Skipf("cannot start %s: %v", d.name, err)
	}
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(20 * time.Second):
			t.Errorf("%s did not stop on SIGTERM: killed", d.name)
			_ = d.cmd.Process.Kill()
			<-d.done
		}
	})
	return d
}

// waitFor polls ready until it holds; it skips the test with the daemons' logs when one of them
// exits first or ctx ends first.
func (s *Slurm) waitFor(ctx context.Context, t testing.TB, what string, daemons []*daemon, ready func() bool) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !ready() {
		for _, d := range daemons {
			select {
			case <-d.done:
				t.Skipf("the private Slurm did not start: %s exited (%v) before %s:\n%s", d.name, d.cmd.ProcessState, what, s.logs(daemons))
			default:
			}
		}
		select {
		case <-ctx.Done():
			t.Skipf("the private Slurm did not start: no %s before the test's deadline:\n%s", what, s.logs(daemons))
		case <-tick.C:
		}
	}
}

// logs returns the last lines of each daemon's output and log file.
func (s *Slurm) logs(daemons []*daemon) string {
	var b strings.Builder
	for _, d := range daemons {
		for _, f := range []string{d.log, filepath.Join(s.Dir, d.name+".log")} {
			data, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			if len(lines) > 15 {
				lines = lines[len(lines)-15:]
			}
			fmt.Fprintf(&b, "--- %s\n%s\n", filepath.Base(f), strings.Join(lines, "\n"))
		}
	}
	return b.String()
}

// drain cancels the cluster's jobs and waits, for at most 30 s, until none is left and no
// process carries this cluster's SLURM_CONF (slurmstepd, tasks) any more; what is left then is
// killed and fails the test.
func (s *Slurm) drain(t testing.TB, paths map[string]string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	_ = s.Command(ctx, paths["scancel"], "--partition=test").Run()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	marker := []byte("SLURM_CONF=" + s.Conf + "\x00")
	for {
		out, err := s.Command(ctx, paths["squeue"], "-h", "-o", "%i").Output()
		left := s.processes(marker)
		if err == nil && len(bytes.TrimSpace(out)) == 0 && len(left) == 0 {
			return
		}
		select {
		case <-tick.C:
			continue
		case <-ctx.Done():
		}
		for _, pid := range left {
			cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			t.Errorf("slurm: process %d (%s) of the cluster left behind: killed", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("slurm: jobs left after scancel: %s", out)
		}
		return
	}
}

// processes returns the processes other than this one and the cluster's daemons whose
// environment holds marker.
func (s *Slurm) processes(marker []byte) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(env, marker) {
			continue
		}
		comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
		switch strings.TrimSpace(string(comm)) {
		case "munged", "slurmctld", "slurmscriptd", "slurmd", "squeue", "scancel": // the daemons (slurmscriptd: slurmctld's helper) and drain's clients
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// lookSbin finds a program on PATH, else in /usr/sbin (daemons, not on every user's PATH).
func lookSbin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return exec.LookPath(filepath.Join("/usr/sbin", name))
}

// freePorts returns n TCP ports that were free a moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatalf("slurm: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}
