package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/goarmci/goarmci/internal/config"
)

// The rendezvous file: how the ranks of an Open MPI job started without GOARMCI_RDV find
// rank 0's rendezvous. mpirun gives its ranks no key-value service reachable without linking
// MPI or PMIx, but it does give every rank the same job id (PMIX_NAMESPACE) and says whether all
// ranks share one node (OMPI_COMM_WORLD_LOCAL_SIZE == OMPI_COMM_WORLD_SIZE). Rank 0 listens on
// an ephemeral port and writes "host:port" to a file named by user id and job id; the others
// poll for it. The file is removed once every rank has joined (or when Connect fails on rank 0).

// rdvFilePath decides where the rendezvous file of an Open MPI job lives, from the environment
// (lookup) and this process's user id: pure, no I/O.
//
// Directory: GOARMCI_RDV_DIR when set (must be absolute); else, when every rank is on this
// node, a node-local per-user directory <TMPDIR or /tmp>/goarmci-<uid>; else $HOME/.goarmci/rdv,
// which clusters usually share between nodes. Name: ompi-<uid>-<job id>[-<hash of mpirun's
// URI>].addr, the job id reduced to [A-Za-z0-9._-] (PMIX_NAMESPACE, else
// OMPI_MCA_ess_base_jobid) and the hash of OMPI_MCA_orte_hnp_uri (Open MPI 4: mpirun's address,
// so that jobs of two mpiruns whose 16-bit job families collide get two files).
//
// Errors wrap ErrBadEnv: no job id, GOARMCI_RDV_DIR relative, ranks on several nodes and
// neither GOARMCI_RDV_DIR nor HOME set.
func rdvFilePath(info Info, lookup func(string) (string, bool), uid int) (string, error) {
	if info.JobID == "" {
		return "", fmt.Errorf("%w: Open MPI without PMIX_NAMESPACE or OMPI_MCA_ess_base_jobid: no job id to name "+
			"the rendezvous file after; set %s=host:port (mpirun -x %s=node01:29500)", ErrBadEnv, config.EnvRDV, config.EnvRDV)
	}
	var dir string
	switch {
	case has(lookup, config.EnvRDVDir):
		dir, _ = lookup(config.EnvRDVDir)
		if !filepath.IsAbs(dir) {
			return "", fmt.Errorf("%w: %s=%q is not an absolute path", ErrBadEnv, config.EnvRDVDir, dir)
		}
	case info.LocalSize > 0 && info.LocalSize == info.Size:
		tmp, ok := lookup("TMPDIR")
		if !ok || !filepath.IsAbs(tmp) {
			tmp = "/tmp"
		}
		dir = filepath.Join(tmp, "goarmci-"+strconv.Itoa(uid))
	default:
		home, ok := lookup("HOME")
		if !ok || !filepath.IsAbs(home) {
			return "", fmt.Errorf("%w: Open MPI job on several nodes, HOME unset: set %s to a directory every node "+
				"sees (mpirun -x %s=/shared/dir), or %s=host:port", ErrBadEnv, config.EnvRDVDir, config.EnvRDVDir, config.EnvRDV)
		}
		dir = filepath.Join(home, ".goarmci", "rdv")
	}
	name := "ompi-" + strconv.Itoa(uid) + "-" + fileSafe(info.JobID)
	if uri, ok := lookup("OMPI_MCA_orte_hnp_uri"); ok {
		h := fnv.New32a()
		h.Write([]byte(uri))
		name += fmt.Sprintf("-%08x", h.Sum32())
	}
	return filepath.Join(filepath.Clean(dir), name+".addr"), nil
}

func has(lookup func(string) (string, bool), k string) bool { _, ok := lookup(k); return ok }

// fileSafe keeps [A-Za-z0-9._-] of s, replaces the other bytes with '_', and bounds it to 64
// bytes.
func fileSafe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	if len(b) > 0 && b[0] == '.' {
		b[0] = '_'
	}
	return string(b)
}

// rdvFileListen is what rank 0 listens on for a file-published rendezvous: loopback when every
// rank is on its node, else every interface.
func rdvFileListen(info Info) string {
	if info.LocalSize > 0 && info.LocalSize == info.Size {
		return "127.0.0.1:0"
	}
	return ":0"
}

// rdvFileAdvertise is the address rank 0 writes to the file for a service bound at bound:
// loopback when every rank is on its node, else advertiseHost (as under PMI-1).
func rdvFileAdvertise(info Info, bound net.Addr) string {
	_, port, _ := net.SplitHostPort(bound.String())
	if info.LocalSize > 0 && info.LocalSize == info.Size {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return net.JoinHostPort(advertiseHost(), port)
}

// writeRDVFile writes addr + "\n" to path atomically: a temporary file in the same directory
// (mode 0600), then a rename over path. It creates the directory (mode 0700) if missing.
// Errors name the path and the knob that moves it.
func writeRDVFile(path, addr string) (err error) {
	dir := filepath.Dir(path)
	defer func() {
		if err != nil {
			err = fmt.Errorf("bootstrap: writing the rendezvous file %s (set %s to another directory, "+
				"or %s=host:port): %w", path, config.EnvRDVDir, config.EnvRDV, err)
		}
	}()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(addr + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readRDVFile reads the address in path. It reports fs.ErrNotExist while rank 0 has not written
// it; a file owned by another user, or whose content is not host:port, is an error wrapping
// ErrProtocol (it is not this job's).
func readRDVFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Getuid() {
		return "", fmt.Errorf("%w: rendezvous file %s belongs to uid %d, not to this user (%d)", ErrProtocol, path, sys.Uid, os.Getuid())
	}
	var b [256]byte
	n, err := f.Read(b[:])
	if err != nil && n == 0 {
		return "", fmt.Errorf("%w: rendezvous file %s is empty: %v", ErrProtocol, path, err)
	}
	addr := strings.TrimSpace(string(b[:n]))
	if err := checkAddr(addr); err != nil {
		return "", fmt.Errorf("%w: rendezvous file %s holds %q: %v", ErrProtocol, path, addr, err)
	}
	return addr, nil
}

// awaitRDVFile waits until the rendezvous file at path names an address that answers, and
// returns that address and the connection. It re-reads the file after every failed dial (each
// bounded to 5 s), so a file left by an earlier job under the same name is replaced by rank 0's
// as soon as rank 0 writes it. Backoff from 5 ms to 500 ms, until ctx ends: then the error wraps
// ErrStartupTimeout and ctx.Err() and names the file, GOARMCI_RDV_DIR and what to do. A file
// that is not this user's or does not parse is an error at once (ErrProtocol).
func awaitRDVFile(ctx context.Context, info Info, path string) (string, net.Conn, error) {
	// A dial attempt is bounded so that an address of a host that no longer answers (a stale
	// file) does not hold the wait past rank 0's fresh file.
	d := net.Dialer{Timeout: 5 * time.Second}
	backoff := 5 * time.Millisecond
	addr := ""
	var lastErr error
	for {
		a, err := readRDVFile(path)
		switch {
		case err == nil:
			addr = a
			conn, derr := d.DialContext(ctx, "tcp", a)
			if derr == nil {
				if tc, ok := conn.(*net.TCPConn); ok {
					_ = tc.SetNoDelay(true)
				}
				return a, conn, nil
			}
			lastErr = derr
		case errors.Is(err, fs.ErrNotExist):
			lastErr = err
		default:
			return "", nil, fmt.Errorf("bootstrap: %s: %w", info, err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			if addr == "" {
				return "", nil, fmt.Errorf("%w: %s: rank 0 never wrote the rendezvous file %s (%v): if the ranks run on "+
					"several nodes, set %s to a directory every node sees (mpirun -x %s=/shared/dir), or pass "+
					"%s=host:port; else see rank 0's error: %w", ErrStartupTimeout, info, path, lastErr,
					config.EnvRDVDir, config.EnvRDVDir, config.EnvRDV, ctx.Err())
			}
			return "", nil, fmt.Errorf("%w: %s: rendezvous %s (from the file %s) never answered (its host: rank 0; %v): "+
				"is rank 0 running? %w", ErrStartupTimeout, info, addr, path, lastErr, ctx.Err())
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}
