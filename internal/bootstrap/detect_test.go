package bootstrap

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExpandHostlist(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"node01", []string{"node01"}},
		{"node[01-04,07]", []string{"node01", "node02", "node03", "node04", "node07"}},
		{"a,b,c", []string{"a", "b", "c"}},
		{"login1,node[8-11]", []string{"login1", "node8", "node9", "node10", "node11"}},
		{"node[098-101]", []string{"node098", "node099", "node100", "node101"}},
		{"r[1-2]n[1-2]", []string{"r1n1", "r1n2", "r2n1", "r2n2"}},
		{"gpu[3]-ib", []string{"gpu3-ib"}},
		{"x[1,3],y[2-3]", []string{"x1", "x3", "y2", "y3"}},
		{" a , b ", []string{"a", "b"}},
	}
	for _, c := range cases {
		got, err := ExpandHostlist(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
	for _, bad := range []string{"", ",", "node[1-", "node]1[", "node[a-b]", "node[3-1]", "node[1-2",
		"node[]", "node[1--2]", "n[0-99999999]", "a[[1]]"} {
		_, err := ExpandHostlist(bad)
		assert.ErrorIs(t, err, ErrBadEnv, "%q", bad)
	}
}

func TestExpandTasksPerNode(t *testing.T) {
	got, err := expandTasksPerNode("2(x3),1")
	require.NoError(t, err)
	assert.Equal(t, []int{2, 2, 2, 1}, got)
	got, err = expandTasksPerNode("4")
	require.NoError(t, err)
	assert.Equal(t, []int{4}, got)
	for _, bad := range []string{"", "x", "2(3)", "2(x0)", "2(x3"} {
		_, err := expandTasksPerNode(bad)
		assert.ErrorIs(t, err, ErrBadEnv, bad)
	}
}

func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok && v != ""
	}
}

func TestDetectEnv(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want Info // Launcher, Rank, Size, LocalRank, LocalSize, JobID, RDV, Nodelist checked
		pmi  bool
	}{
		{"single", nil, Info{Launcher: LauncherSingle, Rank: 0, Size: 1, LocalRank: 0, LocalSize: 1}, false},
		{"goarmci", map[string]string{"GOARMCI_RANK": "2", "GOARMCI_SIZE": "4", "GOARMCI_RDV": "127.0.0.1:5000",
			"GOARMCI_JOBID": "j1", "GOARMCI_LOCAL_RANK": "2", "GOARMCI_LOCAL_SIZE": "4",
			"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, // goarmci wins over everything
			Info{Launcher: LauncherGoarmci, Rank: 2, Size: 4, LocalRank: 2, LocalSize: 4, JobID: "j1", RDV: "127.0.0.1:5000"}, false},
		{"slurm", map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
			"SLURM_NODEID": "2", "SLURM_STEP_TASKS_PER_NODE": "2(x4)", "SLURM_JOB_ID": "77", "SLURM_STEP_ID": "3",
			"SLURM_STEP_NODELIST": "n[1-4]"},
			Info{Launcher: LauncherSlurm, Rank: 5, Size: 8, LocalRank: 1, LocalSize: 2, JobID: "77.3", Nodelist: "n[1-4]"}, false},
		{"slurm with its own PMI (srun --mpi=pmi2)", map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2",
			"SLURM_JOB_ID": "9", "PMI_RANK": "1", "PMI_SIZE": "2", "PMI_FD": "5"},
			Info{Launcher: LauncherSlurm, Rank: 1, Size: 2, LocalRank: -1, LocalSize: -1, JobID: "9"}, true},
		{"mpiexec inside a Slurm allocation", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "1",
			"SLURM_JOB_ID": "9", "PMI_RANK": "3", "PMI_SIZE": "4", "PMI_FD": "5", "MPI_LOCALRANKID": "3", "MPI_LOCALNRANKS": "4"},
			Info{Launcher: LauncherPMI, Rank: 3, Size: 4, LocalRank: 3, LocalSize: 4}, true},
		{"openmpi", map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "3",
			"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "PMIX_NAMESPACE": "prterun-x@1",
			"SLURM_PROCID": "0", "SLURM_NTASKS": "3", "HOME": "/home/u"}, // mpirun in an allocation: OMPI wins
			Info{Launcher: LauncherOpenMPI, Rank: 1, Size: 3, LocalRank: 1, LocalSize: 2, JobID: "prterun-x@1"}, false},
		{"pmi port", map[string]string{"PMI_RANK": "0", "PMI_SIZE": "2", "PMI_PORT": "host:1234", "PMI_ID": "0"},
			Info{Launcher: LauncherPMI, Rank: 0, Size: 2, LocalRank: -1, LocalSize: -1}, true},
		{"empty values are unset", map[string]string{"GOARMCI_RANK": "", "SLURM_PROCID": ""},
			Info{Launcher: LauncherSingle, Rank: 0, Size: 1, LocalRank: 0, LocalSize: 1}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := DetectEnv(envMap(c.env))
			require.NoError(t, err)
			assert.Equal(t, c.want.Launcher, got.Launcher)
			assert.Equal(t, c.want.Rank, got.Rank)
			assert.Equal(t, c.want.Size, got.Size)
			assert.Equal(t, c.want.LocalRank, got.LocalRank)
			assert.Equal(t, c.want.LocalSize, got.LocalSize)
			assert.Equal(t, c.want.JobID, got.JobID)
			assert.Equal(t, c.want.RDV, got.RDV)
			assert.Equal(t, c.want.Nodelist, got.Nodelist)
			assert.Equal(t, c.pmi, got.PMI != nil)
			assert.NotEmpty(t, got.HostID)
		})
	}
}

func TestDetectEnvErrors(t *testing.T) {
	cases := []struct {
		name, mention string
		env           map[string]string
	}{
		{"rank without size", "GOARMCI_SIZE", map[string]string{"GOARMCI_RANK": "0", "GOARMCI_RDV": "h:1"}},
		{"rank not a number", "GOARMCI_RANK", map[string]string{"GOARMCI_RANK": "x", "GOARMCI_SIZE": "2", "GOARMCI_RDV": "h:1"}},
		{"rank >= size", "rank 4 outside [0, 4)", map[string]string{"GOARMCI_RANK": "4", "GOARMCI_SIZE": "4", "GOARMCI_RDV": "h:1"}},
		{"size 0", "size 0", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "0"}},
		{"negative", "SLURM_PROCID", map[string]string{"SLURM_PROCID": "-1", "SLURM_NTASKS": "2"}},
		{"goarmci without rdv", "GOARMCI_RDV", map[string]string{"GOARMCI_RANK": "0", "GOARMCI_SIZE": "2"}},
		{"bad rdv", "GOARMCI_RDV", map[string]string{"GOARMCI_RANK": "0", "GOARMCI_SIZE": "2", "GOARMCI_RDV": "nohostport"}},
		{"local rank >= local size", "local rank", map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4",
			"OMPI_COMM_WORLD_LOCAL_RANK": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}},
		{"local size > size", "local rank", map[string]string{"GOARMCI_RANK": "0", "GOARMCI_SIZE": "2", "GOARMCI_RDV": "h:1",
			"GOARMCI_LOCAL_SIZE": "3"}},
		{"bad PMI_FD", "PMI_FD", map[string]string{"PMI_RANK": "0", "PMI_SIZE": "2", "PMI_FD": "three"}},
		{"PMI without server", "PMI_FD", map[string]string{"PMI_RANK": "0", "PMI_SIZE": "2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DetectEnv(envMap(c.env))
			require.ErrorIs(t, err, ErrBadEnv)
			assert.True(t, strings.Contains(err.Error(), c.mention), "%v should mention %q", err, c.mention)
		})
	}
}

// TestDetectProcessEnv goes through os.Getenv with t.Setenv (empty = unset shields the test
// from a launcher that ran the test binary).
func TestDetectProcessEnv(t *testing.T) {
	for _, k := range []string{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "PMI_RANK", "PMI_SIZE",
		"PMI_FD", "PMI_PORT", "GOARMCI_HOST_ID"} {
		t.Setenv(k, "")
	}
	t.Setenv("GOARMCI_RANK", "1")
	t.Setenv("GOARMCI_SIZE", "3")
	t.Setenv("GOARMCI_RDV", "127.0.0.1:4242")
	t.Setenv("GOARMCI_JOBID", "abc")
	info, err := Detect()
	require.NoError(t, err)
	assert.Equal(t, LauncherGoarmci, info.Launcher)
	assert.Equal(t, 1, info.Rank)
	assert.Equal(t, 3, info.Size)
	assert.Equal(t, "abc", info.JobID)
	assert.Equal(t, "127.0.0.1:4242", info.RDV)
	assert.Contains(t, info.HostID, info.Host)
	assert.Contains(t, info.String(), "launcher goarmci, rank 1 of 3")

	t.Setenv("GOARMCI_HOST_ID", "fake-node-7")
	info, err = Detect()
	require.NoError(t, err)
	assert.Equal(t, "fake-node-7", info.HostID)
}
