package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Knob describes one GOARMCI_* variable.
type Knob struct {
	Name string // environment variable, e.g. GOARMCI_APM
	// Type is bool, int, duration, bytes, string, list or enum(a|b|c). A bytes value is a
	// count with an optional binary (IEC) unit, K = KiB = 1024, M = MiB, G = GiB, T = TiB;
	// decimal units (kB, MB, GB, TB) are rejected, never read as powers of 1000 (ByteSizes).
	Type    string
	Default string // text form of the default; "" for none
	Unit    string // unit of the value (bytes, count, ...) or ""
	Doc     string // one line
	// Launcher is true for bootstrap variables written by a launcher (goarmci run) and read
	// by internal/bootstrap; they are not fields of Config.
	Launcher bool
	// Secret is true for a variable whose value is never printed (GOARMCI_JOB_SECRET).
	Secret bool

	get func(*Config) string
	set func(*Config, string) error
}

// Value returns the knob's current value in c as text; launcher variables return "".
func (k Knob) Value(c *Config) string {
	if k.get == nil {
		return ""
	}
	return k.get(c)
}

// Knobs returns the table of every knob, configuration first, then launcher variables.
func Knobs() []Knob { return append([]Knob(nil), table...) }

func lookup(name string) (Knob, bool) {
	for _, k := range table {
		if k.Name == name {
			return k, true
		}
	}
	return Knob{}, false
}

// suggest returns the known name closest to an unknown one, if it is close.
func suggest(name string) string {
	best, bestD := "", 4
	for _, k := range table {
		if d := editDistance(name, k.Name); d < bestD {
			best, bestD = k.Name, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Launcher (bootstrap) variables, read by internal/bootstrap.
const (
	EnvRank      = "GOARMCI_RANK"
	EnvSize      = "GOARMCI_SIZE"
	EnvRDV       = "GOARMCI_RDV"
	EnvJobID     = "GOARMCI_JOBID"
	EnvLocalRank = "GOARMCI_LOCAL_RANK"
	EnvLocalSize = "GOARMCI_LOCAL_SIZE"
	EnvHostID    = "GOARMCI_HOST_ID"
	EnvRDVDir    = "GOARMCI_RDV_DIR"
	// EnvJobSecret is the job's secret in hex (internal/secret): set by goarmci run, or by the
	// user for every rank under another launcher; never printed.
	EnvJobSecret = "GOARMCI_JOB_SECRET"
)

// NetTransports are GOARMCI_NET_TRANSPORT's values.
var NetTransports = []string{"rc", "dc", "adaptive"}

// BarrierAlgs are GOARMCI_BARRIER's values: auto, then the names of rma.BarrierAlg's algorithms.
var BarrierAlgs = []string{"auto", "dissemination", "pairwise", "gather-broadcast", "rgm", "message", "message-pairwise", "hierarchical"}

var table = []Knob{
	{Name: "GOARMCI_TRANSPORT", Type: "enum(auto|shm|tcp)", Default: "auto",
		Doc: "how ranks reach each other: auto = shm within a node, tcp between nodes",
		get: func(c *Config) string { return string(c.Transport) },
		set: func(c *Config, v string) error {
			switch t := Transport(strings.ToLower(strings.TrimSpace(v))); t {
			case TransportAuto, TransportShm, TransportTCP:
				c.Transport = t
				return nil
			}
			return fmt.Errorf("want auto, shm or tcp")
		}},
	{Name: "GOARMCI_SHM_DIR", Type: "string", Default: "/dev/shm",
		Doc: "directory (a tmpfs, the same for every rank of a node) of the shared-memory control files, 580 KiB per rank, allocated at start-up",
		get: func(c *Config) string { return c.ShmDir },
		set: func(c *Config, v string) error {
			v = strings.TrimSpace(v)
			if !filepath.IsAbs(v) {
				return fmt.Errorf("want an absolute directory path")
			}
			c.ShmDir = filepath.Clean(v)
			return nil
		}},
	{Name: "GOARMCI_RAILS", Type: "list", Default: "",
		Doc: "comma list of interface names or listen addresses, one per rail; none = host address",
		get: func(c *Config) string { return strings.Join(c.Rails, ",") },
		set: func(c *Config, v string) error {
			var rails []string
			for r := range strings.SplitSeq(v, ",") {
				r = strings.TrimSpace(r)
				if r == "" {
					continue
				}
				if strings.ContainsAny(r, " \t") {
					return fmt.Errorf("rail %q contains white space", r)
				}
				rails = append(rails, r)
			}
			c.Rails = rails
			return nil
		}},
	{Name: "GOARMCI_PATHS", Type: "int", Default: "1", Unit: "paths",
		Doc: "paths per rail: each network peer's channel gets rails × paths subchannels, one RC queue pair per (rail, path bits), path bits routed as LMC offsets of the destination LID [Vishnu07 §2.2, ch. 7]; on tcp each path is its own stream; 1..64, rails × paths ≤ 64",
		get: func(c *Config) string { return strconv.Itoa(c.Paths) },
		set: intSetter(func(c *Config) *int { return &c.Paths }, 1, MaxPaths)},
	{Name: "GOARMCI_LOG_LEVEL", Type: "enum(zerolog level)",
		Default: "warn", Doc: "zerolog level of the runtime's log",
		get: func(c *Config) string { return c.LogLevel },
		set: func(c *Config, v string) error {
			v = strings.ToLower(strings.TrimSpace(v))
			if v == "warning" {
				v = "warn"
			}
			if _, err := zerolog.ParseLevel(v); err != nil || v == "" {
				return fmt.Errorf("want a zerolog level name (trace, debug, info, warn, error, disabled)")
			}
			c.LogLevel = v
			return nil
		}},
	{Name: "GOARMCI_LOG_FILE", Type: "string", Default: "",
		Doc: "log file (appended; %r = rank); empty = stderr",
		get: func(c *Config) string { return c.LogFile },
		set: func(c *Config, v string) error { c.LogFile = v; return nil }},
	{Name: "GOARMCI_LOG_FORMAT", Type: "enum(auto|json|console)", Default: "auto",
		Doc: "log encoding: one JSON object per line, or human-readable console lines; auto = console on a terminal, JSON otherwise",
		get: func(c *Config) string { return string(c.LogFormat) },
		set: func(c *Config, v string) error {
			switch f := LogFormat(strings.ToLower(strings.TrimSpace(v))); f {
			case LogAuto, LogJSON, LogConsole:
				c.LogFormat = f
				return nil
			}
			return fmt.Errorf("want auto, json or console")
		}},
	{Name: "GOARMCI_STARTUP_TIMEOUT", Type: "duration", Default: "60s",
		Doc: "deadline of every wait at start-up (rendezvous, first exchange)",
		get: func(c *Config) string { return c.StartupTimeout.String() },
		set: durationSetter(func(c *Config) *time.Duration { return &c.StartupTimeout }, false)},
	{Name: "GOARMCI_FT", Type: "bool", Default: "true",
		Doc: "hybrid network fault tolerance on network connections: APM, then software recovery [Vishnu09]; false = plain RC",
		get: func(c *Config) string { return strconv.FormatBool(c.FT) },
		set: boolSetter(func(c *Config) *bool { return &c.FT })},
	{Name: "GOARMCI_ON_DEMAND_THRESHOLD", Type: "int", Default: "64", Unit: "ranks",
		Doc: "jobs of more ranks connect network peers on demand (first use) through the UD connection manager; 0 = always (needs GOARMCI_FT)",
		get: func(c *Config) string { return strconv.Itoa(c.OnDemandThreshold) },
		set: func(c *Config, v string) error {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 0 {
				return fmt.Errorf("want a non-negative integer")
			}
			c.OnDemandThreshold = n
			return nil
		}},
	{Name: "GOARMCI_BIND", Type: "enum(auto|none)", Default: "auto",
		Doc: "bind each rank of a machine to its own share of the CPUs at start-up (as mpirun --bind-to core) where several ranks share the machine, each has a core and no launcher bound them; none = leave placement to the kernel",
		get: func(c *Config) string { return c.Bind },
		set: enumSetter(func(c *Config) *string { return &c.Bind }, []string{"auto", "none"})},
	{Name: "GOARMCI_NET_TRANSPORT", Type: "enum(" + strings.Join(NetTransports, "|") + ")", Default: "rc",
		Doc: "how network peers are reached: rc = an RC connection per peer and rail; dc = one DC queue pair per rail for every peer (the shared datagram path); adaptive = the shared path, at most GOARMCI_MAX_RC peers promoted to RC from their traffic [Takagi15]",
		get: func(c *Config) string { return c.NetTransport },
		set: enumSetter(func(c *Config) *string { return &c.NetTransport }, NetTransports)},
	{Name: "GOARMCI_MAX_RC", Type: "int", Default: "26", Unit: "connections",
		Doc: "adaptive transport: RC connections a rank keeps open at most (h of [Takagi15 §3.2]); 0 = every network peer on the shared path",
		get: func(c *Config) string { return strconv.Itoa(c.MaxRC) },
		set: intSetter(func(c *Config) *int { return &c.MaxRC }, 0, 1<<16)},
	{Name: "GOARMCI_RC_WINDOW", Type: "duration", Default: "2s",
		Doc: "adaptive transport: the statistics window the selection looks back over (evaluated about once a second)",
		get: func(c *Config) string { return c.RCWindow.String() },
		set: durationSetter(func(c *Config) *time.Duration { return &c.RCWindow }, false)},
	{Name: "GOARMCI_RC_GAMMA", Type: "duration", Default: "25ns",
		Doc: "adaptive transport: γ, the latency reduction per message a new mapping must promise before it is applied [Takagi15 §3.4]",
		get: func(c *Config) string { return c.RCGamma.String() },
		set: durationSetter(func(c *Config) *time.Duration { return &c.RCGamma }, true)},
	{Name: "GOARMCI_RC_IDLE_TIMEOUT", Type: "duration", Default: "10s",
		Doc: "adaptive transport: an RC connection that carried nothing this long is closed (both ends agree) and dialled again on demand",
		get: func(c *Config) string { return c.RCIdleTimeout.String() },
		set: durationSetter(func(c *Config) *time.Duration { return &c.RCIdleTimeout }, false)},
	{Name: "GOARMCI_APM", Type: "bool", Default: "true",
		Doc: "automatic path migration: arm an alternate path on every RC queue pair [Vishnu07 ch. 9]",
		get: func(c *Config) string { return strconv.FormatBool(c.APM) },
		set: boolSetter(func(c *Config) *bool { return &c.APM })},
	{Name: "GOARMCI_APM_TEST", Type: "duration", Default: "0s",
		Doc: "force a manual path migration of every armed queue pair at this period (0 = off; like MV2_USE_APM_TEST)",
		get: func(c *Config) string { return c.APMTest.String() },
		set: durationSetter(func(c *Config) *time.Duration { return &c.APMTest }, true)},
	{Name: "GOARMCI_ACK_TIMEOUT", Type: "duration", Default: "50ms",
		Doc: "RC ACK timeout per attempt before a retransmission",
		get: func(c *Config) string { return c.AckTimeout.String() },
		set: durationSetter(func(c *Config) *time.Duration { return &c.AckTimeout }, false)},
	{Name: "GOARMCI_RETRY_COUNT", Type: "int", Default: "7", Unit: "count",
		Doc: "RC retransmissions before the queue pair migrates (APM) or fails",
		get: func(c *Config) string { return strconv.Itoa(c.RetryCount) },
		set: intSetter(func(c *Config) *int { return &c.RetryCount }, 0, 1<<20)},
	{Name: "GOARMCI_BARRIER", Type: "enum(" + strings.Join(BarrierAlgs, "|") + ")", Default: "auto",
		Doc: "algorithm of rma.Runtime.Barrier and GA_Sync: auto = chosen at start-up from the job's nodes, ranks, transport and multicast (rma/barrier_choice.go), or one of rma.BarrierWith's",
		get: func(c *Config) string { return c.Barrier },
		set: enumSetter(func(c *Config) *string { return &c.Barrier }, BarrierAlgs)},
	{Name: "GOARMCI_BARRIER_FANIN", Type: "int", Default: "7", Unit: "ranks",
		Doc: "fan-in of the gather tree of the gather + multicast barrier (rma.BarrierRGM, [Kini03 §3.3]), 2..15",
		get: func(c *Config) string { return strconv.Itoa(c.BarrierFanIn) },
		set: intSetter(func(c *Config) *int { return &c.BarrierFanIn }, 2, 15)},
	{Name: "GOARMCI_PARTITION_TIMEOUT", Type: "duration", Default: "30s",
		Doc: "how long an operation blocks while no path to its target exists before it fails with rma.ErrPartition (far above APM's and software recovery's timers); 0 = until its context ends",
		get: func(c *Config) string { return c.PartitionTimeout.String() },
		set: durationSetter(func(c *Config) *time.Duration { return &c.PartitionTimeout }, true)},
	{Name: "GOARMCI_FAILURE_TIMEOUT", Type: "duration", Default: "2s",
		Doc: "a rank silent on its rendezvous connection while its host answers (stopped, hung) is declared failed (rma.ErrPeerFailed) within this of its last heartbeat, never for a pause under 3/4 of it; cut off: after GOARMCI_PARTITION_TIMEOUT plus this; an ended process at once; 0 = no heartbeats",
		get: func(c *Config) string { return c.FailureTimeout.String() },
		set: durationSetter(func(c *Config) *time.Duration { return &c.FailureTimeout }, true)},
	{Name: "GOARMCI_TCP_POLL", Type: "auto|off|duration", Default: "auto",
		Doc: "how long a rank waiting for a network completion polls before it parks, waking the tcp stream readers whose sockets hold frames (tcp.Progress); auto = 50µs when the machine has at most as many ranks as cores, else off",
		get: func(c *Config) string { return c.TCPPoll },
		set: func(c *Config, v string) error {
			v = strings.ToLower(strings.TrimSpace(v))
			if v != "auto" && v != "off" {
				if d, err := time.ParseDuration(v); err != nil || d < 0 || d > time.Second {
					return fmt.Errorf("want auto, off or a duration up to 1s")
				}
			}
			c.TCPPoll = v
			return nil
		}},
	{Name: "GOARMCI_STRIPE_POLICY", Type: "string", Default: "auto",
		Doc: "multi-rail policy (e.g. binding, round-robin, even, weighted, adaptive, bss, hsam, fragment); auto = adaptive striping over every rail and path, which keeps the rate when a path turns into a hot spot; multirail validates it",
		get: func(c *Config) string { return c.StripePolicy },
		set: func(c *Config, v string) error {
			v = strings.ToLower(strings.TrimSpace(v))
			if v == "" || strings.ContainsAny(v, " \t,") {
				return fmt.Errorf("want one policy name")
			}
			c.StripePolicy = v
			return nil
		}},
	{Name: "GOARMCI_STRIPE_THRESHOLD", Type: "bytes", Default: "16KiB", Unit: "bytes",
		Doc: "message size from which messages are striped over rails; smaller ones go whole, on the previous operation's rail while it is idle [Vishnu07 §5.2.3]",
		get: func(c *Config) string { return FormatBytes(c.StripeThreshold) },
		set: func(c *Config, v string) error {
			n, err := ParseBytes(v)
			if err != nil {
				return err
			}
			c.StripeThreshold = n
			return nil
		}},
	{Name: "GOARMCI_STATS", Type: "enum(false|true|json)", Default: "false",
		Doc: "count communication statistics and print them per rank on standard error at Finalize: operations, bytes and time waiting per peer, work requests, retransmissions, path migrations and recoveries per rail, time in synchronization (rma.Runtime.Stats); true prints readable lines, json one JSON object per rank",
		get: func(c *Config) string {
			if c.Stats && c.StatsFormat == StatsJSON {
				return "json"
			}
			return strconv.FormatBool(c.Stats)
		},
		set: func(c *Config, v string) error {
			if strings.EqualFold(strings.TrimSpace(v), "json") {
				c.Stats, c.StatsFormat = true, StatsJSON
				return nil
			}
			c.StatsFormat = StatsText
			if err := boolSetter(func(c *Config) *bool { return &c.Stats })(c, v); err != nil {
				return fmt.Errorf("want true, false or json")
			}
			return nil
		}},

	{Name: EnvRank, Type: "int", Launcher: true, Doc: "this process's rank (set by goarmci run)"},
	{Name: EnvSize, Type: "int", Launcher: true, Doc: "number of ranks in the job (set by goarmci run)"},
	{Name: EnvRDV, Type: "string", Launcher: true,
		Doc: "host:port of the rendezvous service; set by goarmci run; with another launcher rank 0 hosts it at that port"},
	{Name: EnvRDVDir, Type: "string", Launcher: true,
		Doc: "Open MPI's mpirun without GOARMCI_RDV: directory of the file through which rank 0 hands out the rendezvous address; must be seen by every node (default: <TMPDIR or /tmp>/goarmci-<uid> when all ranks share a node, else $HOME/.goarmci/rdv)"},
	{Name: EnvJobID, Type: "string", Launcher: true, Doc: "job id (set by goarmci run)"},
	{Name: EnvLocalRank, Type: "int", Launcher: true, Doc: "rank among the ranks of this node (set by goarmci run)"},
	{Name: EnvLocalSize, Type: "int", Launcher: true, Doc: "number of ranks on this node (set by goarmci run)"},
	{Name: EnvJobSecret, Type: "string", Launcher: true, Secret: true,
		Doc: "the job's secret, 64 hex digits, proven in every connection handshake and CM message (set by goarmci run; under another launcher rank 0 makes one unless every rank has this); never printed"},
	{Name: EnvHostID, Type: "string", Launcher: true,
		Doc: "node identity override: ranks with equal host ids share memory (default hostname/boot id)"},
}

// intSetter sets an integer knob to a value in [lo, hi].
func intSetter(field func(*Config) *int, lo, hi int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("want an integer in [%d, %d]", lo, hi)
		}
		*field(c) = n
		return nil
	}
}

// enumSetter sets a string knob to one of values (case and surrounding blanks ignored).
func enumSetter(field func(*Config) *string, values []string) func(*Config, string) error {
	return func(c *Config, v string) error {
		v = strings.ToLower(strings.TrimSpace(v))
		if !slices.Contains(values, v) {
			return fmt.Errorf("want one of %s", strings.Join(values, ", "))
		}
		*field(c) = v
		return nil
	}
}

func boolSetter(field func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "1", "t", "true", "y", "yes", "on":
			*field(c) = true
		case "0", "f", "false", "n", "no", "off":
			*field(c) = false
		default:
			return fmt.Errorf("want true or false")
		}
		return nil
	}
}

func durationSetter(field func(*Config) *time.Duration, zeroOK bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("want a duration such as 500ms or 2m")
		}
		if d < 0 || (d == 0 && !zeroOK) {
			return fmt.Errorf("want a positive duration")
		}
		*field(c) = d
		return nil
	}
}
