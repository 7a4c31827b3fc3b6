//go:build unix

package filelock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// lock uses flock: its locks belong to the open file, so two opens exclude each other even in
// one process (fcntl's record locks would not, and one close would drop them all).
func lock(path string, exclusive bool) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &HeldError{Path: path, PIDs: holders(f)}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{release: f.Close}, nil
}

// holders reads the pids of the flock locks on f's file from /proc/locks, where Linux lists
// every lock as "1: FLOCK  ADVISORY  WRITE 5841 fe:00:9979450 0 EOF" (pid, then the device's
// major and minor number in hex and the inode). Elsewhere, or if anything does not parse, it
// returns nil: the pids only make the refusal's message more helpful.
func holders(f *os.File) []int {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return nil
	}
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return nil
	}
	defer locks.Close()
	dev := uint64(st.Dev) // the conversion is needed where Dev is signed (Darwin, BSDs)
	major := (dev>>8)&0xfff | (dev>>32)&^uint64(0xfff)
	minor := dev&0xff | (dev>>12)&^uint64(0xff)
	file := fmt.Sprintf("%02x:%02x:%d", major, minor, st.Ino)
	var pids []int
	lines := bufio.NewScanner(locks)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		// Waiters are listed as "1: -> FLOCK …"; only holders count.
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[5] != file {
			continue
		}
		if pid, err := strconv.Atoi(fields[4]); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
