package scale

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// ctlResult is what the controller's process measured (times in Unix
// nanoseconds, durations in microseconds).
type ctlResult struct {
	FirstConn, LastConn, Released   int64 // first and last wait, the Release call's end
	WriteUS                         int64 // writing the launch files (WriteDir)
	LaunchBytes, LaunchFiles        int64
	BcastUS                         int64 // Broadcast of ckpt 1 to every shim
	BeatsFirst, BeatsLast           int64
	Beats                           int
	BeatP50US, BeatP99US, BeatMaxUS int64 // send (in the shim) to handled (here)
	MaxRSSKiB                       int64
	UserMS, SysMS                   int64
	Refused                         int
}

// runController is the controller's side of a step started before its
// plan, from the real server: listen on loopback, write common.json, ask
// the first rank of each node to probe, and when every rank waits and every
// node is probed write the launch files (common.json and one file per
// node) and release. Then broadcast ckpt 1 (the shims answer with a beat
// each: the burst a controller sees when every rank's state changes at
// once) and ckpt 2 (the shims save and exit).
func runController(world int, dir, _ string) (*ctlResult, error) {
	if err := raiseNoFile(world + 256); err != nil {
		return nil, err
	}
	srv, err := launch.Listen("127.0.0.1", world)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	common := launch.Common{JobID: "4242", World: world, Control: srv.Addr(), Token: srv.Token, Signal: "USR2", Env: commonEnv()}
	if err := launch.WriteCommon(dir, common); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "probe"), 0o755); err != nil {
		return nil, err
	}
	var res ctlResult
	if err := control(srv, world, dir, common, &res); err != nil {
		return nil, err
	}
	res.Refused = srv.Refused()
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	res.MaxRSSKiB = ru.Maxrss
	res.UserMS, res.SysMS = tvMS(ru.Utime), tvMS(ru.Stime)
	return &res, nil
}

func tvMS(t syscall.Timeval) int64 { return t.Sec*1000 + t.Usec/1000 }

// control is the event loop: one event at a time, as the monitor reads
// srv.Events.
func control(srv *launch.Server, world int, dir string, common launch.Common, res *ctlResult) error {
	probing := map[string]bool{}
	var waits, probed, hellos, exits int
	var lat []int64
	deadline := time.After(time.Duration(60+world/100) * time.Second)
	for exits < world {
		var ev launch.Event
		select {
		case ev = <-srv.Events:
		case <-deadline:
			return fmt.Errorf("%d ranks: after the deadline %d waited, %d of %d nodes probed, %d said hello, %d beat, %d exited; %d connections refused",
				world, waits, probed, len(probing), hellos, len(lat), exits, srv.Refused())
		}
		switch ev.Kind {
		case launch.Wait:
			if waits++; waits == 1 {
				res.FirstConn = ev.At.UnixNano()
			}
			res.LastConn = ev.At.UnixNano()
			if !probing[ev.Node] {
				probing[ev.Node] = true
				srv.SendTo(ev.Rank, launch.Msg{Kind: launch.Probe})
			}
		case launch.Probed:
			probed++
		case launch.Hello:
			if hellos++; hellos == world {
				t := time.Now()
				srv.Broadcast(launch.Msg{Kind: launch.Ckpt, CkptID: 1})
				res.BcastUS = time.Since(t).Microseconds()
			}
		case launch.Beat:
			now := time.Now()
			lat = append(lat, now.UnixMicro()-ev.Step)
			if len(lat) == 1 {
				res.BeatsFirst = now.UnixNano()
			}
			if len(lat) == world {
				res.BeatsLast = now.UnixNano()
				srv.Broadcast(launch.Msg{Kind: launch.Ckpt, CkptID: 2})
			}
		case launch.Exit:
			exits++
		}
		if ev.Kind == launch.Wait || ev.Kind == launch.Probed {
			if waits == world && probed == len(probing) && res.Released == 0 {
				if err := release(srv, world, dir, common, res); err != nil {
					return err
				}
			}
		}
	}
	slices.Sort(lat)
	res.Beats = len(lat)
	res.BeatP50US, res.BeatP99US, res.BeatMaxUS = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	return nil
}

// release writes the launch files, then says go.
func release(srv *launch.Server, world int, dir string, common launch.Common, res *ctlResult) error {
	t := time.Now()
	ranks := make([]launch.Rank, world)
	for r := range ranks {
		lr := r % RanksPerNode
		ranks[r] = launch.Rank{Rank: r, Node: nodeOf(r), LocalRank: lr, GPU: lr, GPUSlot: lr,
			CPUs: fmt.Sprintf("%d-%d", lr*12, lr*12+11), Env: rankEnv(r, lr)}
	}
	if err := launch.WriteDir(dir, common, ranks); err != nil {
		return err
	}
	res.WriteUS = time.Since(t).Microseconds()
	srv.Release()
	res.Released = time.Now().UnixNano()
	return filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && filepath.Base(filepath.Dir(p)) != "probe" {
			res.LaunchBytes += fi.Size()
			res.LaunchFiles++
		}
		return err
	})
}

// commonEnv and rankEnv are the size of what the controller writes for a
// Megatron-style job: about twenty common variables, seven per rank.
func commonEnv() map[string]string {
	env := map[string]string{"MASTER_ADDR": "n00000", "MASTER_PORT": "29500", "NCCL_IB_HCA": "mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7",
		"NCCL_SOCKET_IFNAME": "ib0", "TRAINRUN_CKPT_DIR": "/lustre/proj/ckpt/run-1", "TRAINRUN_JOB_DIR": "/lustre/proj/trainrun-4242"}
	for i := 0; len(env) < 20; i++ {
		env["TRAINRUN_X"+strconv.Itoa(i)] = "value-" + strconv.Itoa(i)
	}
	return env
}

func rankEnv(r, lr int) map[string]string {
	return map[string]string{"RANK": strconv.Itoa(r), "LOCAL_RANK": strconv.Itoa(lr), "GROUP_RANK": strconv.Itoa(r / RanksPerNode),
		"CUDA_VISIBLE_DEVICES": strconv.Itoa(lr), "TRAINRUN_TP_RANK": strconv.Itoa(lr), "TRAINRUN_PP_RANK": strconv.Itoa(r / RanksPerNode % 16),
		"TRAINRUN_DP_RANK": strconv.Itoa(r / 128)}
}
