package bootstrap

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// pmiClient speaks the PMI-1 wire protocol ("simple PMI" of MPICH/Hydra; Slurm's mpi/pmi2
// plugin answers it too): one command per line, "cmd=NAME key=value ...". Only what the
// rendezvous needs: init, get_my_kvsname, put, barrier_in, get, finalize.
type pmiClient struct {
	conn net.Conn
	r    *bufio.Reader
	kvs  string
	// rank and size as told by the server in PMI_PORT mode (-1 otherwise).
	rank, size int
}

// maxPMILine bounds one PMI line (bytes); PMI-1 values are at most a few KiB.
const maxPMILine = 64 << 10

// dialPMI connects to the PMI server (inherited PMI_FD, or PMI_PORT with PMI_ID), performs
// cmd=init and cmd=get_my_kvsname. Errors wrap ErrPMI, ErrProtocol or ErrBadEnv.
func dialPMI(ctx context.Context, env *PMIEnv) (*pmiClient, error) {
	p := &pmiClient{rank: -1, size: -1}
	if env.FD >= 0 {
		f := os.NewFile(uintptr(env.FD), "PMI_FD")
		if f == nil {
			return nil, fmt.Errorf("%w: PMI_FD=%d is not open", ErrBadEnv, env.FD)
		}
		c, err := net.FileConn(f)
		f.Close() // FileConn holds its own duplicate
		if err != nil {
			return nil, fmt.Errorf("%w: PMI_FD=%d is not a socket: %v", ErrBadEnv, env.FD, err)
		}
		p.conn = c
	} else {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", env.Port)
		if err != nil {
			return nil, fmt.Errorf("%w: PMI_PORT=%s: %w", ErrPMI, env.Port, err)
		}
		p.conn = c
	}
	p.r = bufio.NewReaderSize(p.conn, 4096)
	fail := func(err error) (*pmiClient, error) { p.close(); return nil, err }
	if env.FD < 0 {
		// PMI_PORT handshake: identify, then the server sets size, rank and debug.
		if _, err := p.cmd(ctx, "cmd=initack pmiid="+env.ID, "initack"); err != nil {
			return fail(err)
		}
		for range 3 {
			kv, err := p.readLine(ctx, "set")
			if err != nil {
				return fail(err)
			}
			if v, ok := kv["size"]; ok {
				p.size, _ = strconv.Atoi(v)
			}
			if v, ok := kv["rank"]; ok {
				p.rank, _ = strconv.Atoi(v)
			}
		}
	}
	if _, err := p.cmd(ctx, "cmd=init pmi_version=1 pmi_subversion=1", "response_to_init"); err != nil {
		return fail(err)
	}
	kv, err := p.cmd(ctx, "cmd=get_my_kvsname", "my_kvsname")
	if err != nil {
		return fail(err)
	}
	if p.kvs = kv["kvsname"]; p.kvs == "" {
		return fail(fmt.Errorf("%w: PMI my_kvsname without kvsname", ErrProtocol))
	}
	return p, nil
}

// put stores key=value in this job's PMI key-value space (PMI_KVS_Put; the simple wire
// protocol has no separate commit).
func (p *pmiClient) put(ctx context.Context, key, value string) error {
	if err := pmiToken(key); err != nil {
		return err
	}
	if err := pmiToken(value); err != nil {
		return err
	}
	_, err := p.cmd(ctx, "cmd=put kvsname="+p.kvs+" key="+key+" value="+value, "put_result")
	return err
}

// get reads key from this job's PMI key-value space (PMI_KVS_Get).
func (p *pmiClient) get(ctx context.Context, key string) (string, error) {
	if err := pmiToken(key); err != nil {
		return "", err
	}
	kv, err := p.cmd(ctx, "cmd=get kvsname="+p.kvs+" key="+key, "get_result")
	if err != nil {
		return "", err
	}
	v, ok := kv["value"]
	if !ok {
		return "", fmt.Errorf("%w: PMI get_result without value", ErrProtocol)
	}
	return v, nil
}

// barrier waits for every process of the PMI job (PMI_Barrier).
func (p *pmiClient) barrier(ctx context.Context) error {
	_, err := p.cmd(ctx, "cmd=barrier_in", "barrier_out")
	return err
}

// finalize tells the PMI server this process is done (PMI_Finalize).
func (p *pmiClient) finalize(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := p.cmd(ctx, "cmd=finalize", "finalize_ack")
	return err
}

func (p *pmiClient) close() error { return p.conn.Close() }

// cmd sends one command line and reads the answer, which must be cmd=want; an rc other than
// 0 gives ErrPMI with the server's msg.
func (p *pmiClient) cmd(ctx context.Context, line, want string) (map[string]string, error) {
	stop := deadlineFromContext(ctx, p.conn)
	defer stop()
	if _, err := p.conn.Write([]byte(line + "\n")); err != nil {
		return nil, fmt.Errorf("%w: PMI %s: %w", ErrPMI, want, ctxErr(ctx, err))
	}
	return p.readLine(ctx, want)
}

func (p *pmiClient) readLine(ctx context.Context, want string) (map[string]string, error) {
	stop := deadlineFromContext(ctx, p.conn)
	defer stop()
	var line []byte
	for {
		chunk, isPrefix, err := p.r.ReadLine()
		if err != nil {
			return nil, fmt.Errorf("%w: PMI waiting for %s: %w", ErrPMI, want, ctxErr(ctx, err))
		}
		line = append(line, chunk...)
		if len(line) > maxPMILine {
			return nil, fmt.Errorf("%w: PMI line longer than %d bytes", ErrProtocol, maxPMILine)
		}
		if !isPrefix {
			break
		}
	}
	kv, err := parsePMILine(string(line))
	if err != nil {
		return nil, err
	}
	if kv["cmd"] != want {
		return nil, fmt.Errorf("%w: PMI answered %q, want cmd=%s", ErrProtocol, line, want)
	}
	if rc, ok := kv["rc"]; ok && rc != "0" {
		return nil, fmt.Errorf("%w: %s rc=%s: %s", ErrPMI, want, rc, kv["msg"])
	}
	return kv, nil
}

// parsePMILine splits "cmd=x a=1 b=2" into a map; a field without '=' is a protocol error.
func parsePMILine(line string) (map[string]string, error) {
	kv := map[string]string{}
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: PMI field %q in %q", ErrProtocol, f, line)
		}
		kv[k] = v
	}
	if kv["cmd"] == "" {
		return nil, fmt.Errorf("%w: PMI line without cmd: %q", ErrProtocol, line)
	}
	return kv, nil
}

// pmiToken checks a key or value can travel in a PMI-1 line.
func pmiToken(s string) error {
	if s == "" || strings.ContainsAny(s, " \t\n\r=") {
		return fmt.Errorf("%w: PMI key or value %q is empty or contains white space or '='", ErrBadEnv, s)
	}
	return nil
}

// deadlineFromContext makes conn's I/O end when ctx does; the returned func undoes it.
func deadlineFromContext(ctx context.Context, conn net.Conn) func() {
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = conn.SetDeadline(time.Unix(1, 0))
		close(fired)
	})
	return func() {
		if !stop() {
			<-fired
		}
		_ = conn.SetDeadline(time.Time{})
	}
}

// ctxErr prefers the context's error to the I/O timeout it caused.
func ctxErr(ctx context.Context, err error) error {
	if e := ctxCause(ctx, err); e != nil {
		return e
	}
	return err
}

// ctxCause returns the context's error when err (an I/O error) was caused by ctx ending: the
// connection deadline copied from ctx may fire a moment before ctx reports its end.
func ctxCause(ctx context.Context, err error) error {
	if e := ctx.Err(); e != nil {
		return e
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			return context.DeadlineExceeded
		}
	}
	return nil
}
