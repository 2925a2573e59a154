package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The NoCloud seed: a disk labelled cidata (KubeVirt's cloudInitNoCloud
// volume is an ISO9660 image, Rock Ridge + Joliet, made by xorrisofs
// -volid cidata; cloud-localds can make a vfat one) holding user-data,
// meta-data and, when given, network-config.

type seed struct {
	dev                               string
	userData, metaData, networkConfig string
}

const seedDir = "/run/cloud-init/seed"

// readSeed finds the cidata disk (waiting up to timeout for it to appear),
// mounts it read-only and reads its files.
func readSeed(timeout time.Duration) (seed, error) {
	deadline := time.Now().Add(timeout)
	for {
		blocks, _ := filepath.Glob("/sys/class/block/*")
		for _, b := range blocks {
			name := filepath.Base(b)
			if strings.HasPrefix(name, "loop") || strings.HasPrefix(name, "ram") {
				continue
			}
			dev := "/dev/" + name
			fstype, label := fsLabel(dev)
			if fstype != "" && strings.EqualFold(label, "cidata") {
				return mountSeed(dev, fstype)
			}
		}
		if time.Now().After(deadline) {
			return seed{}, errors.New("no NoCloud seed (a disk labelled cidata)")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fsLabel reads an ISO9660 or FAT volume label.
func fsLabel(dev string) (fstype, label string) {
	f, err := os.Open(dev)
	if err != nil {
		return "", ""
	}
	defer f.Close()
	buf := make([]byte, 0x8800)
	n, _ := io.ReadFull(f, buf)
	buf = buf[:n]
	return labelOf(buf)
}

func labelOf(buf []byte) (fstype, label string) {
	trim := func(b []byte) string { return strings.TrimRight(string(b), " \x00") }
	// ISO9660: the primary volume descriptor is sector 16 (2048-byte sectors).
	if len(buf) >= 0x8048 && buf[0x8000] == 1 && string(buf[0x8001:0x8006]) == "CD001" {
		return "iso9660", trim(buf[0x8028:0x8048])
	}
	if len(buf) >= 512 && buf[510] == 0x55 && buf[511] == 0xaa {
		switch {
		case string(buf[0x52:0x57]) == "FAT32":
			return "vfat", trim(buf[0x47:0x52])
		case bytes.HasPrefix(buf[0x36:0x3e], []byte("FAT")):
			return "vfat", trim(buf[0x2b:0x36])
		}
	}
	return "", ""
}

func mountSeed(dev, fstype string) (seed, error) {
	s := seed{dev: dev}
	if err := os.MkdirAll(seedDir, 0o700); err != nil {
		return s, err
	}
	if err := unix.Mount(dev, seedDir, fstype, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return s, fmt.Errorf("mount %s (%s): %w", dev, fstype, err)
	}
	defer unix.Unmount(seedDir, 0)
	read := func(name string, required bool) (string, error) {
		b, err := os.ReadFile(filepath.Join(seedDir, name))
		if err != nil && (required || !errors.Is(err, os.ErrNotExist)) {
			return "", fmt.Errorf("%s on %s: %w", name, dev, err)
		}
		return string(b), nil
	}
	var errs [3]error
	s.userData, errs[0] = read("user-data", true)
	s.metaData, errs[1] = read("meta-data", true)
	s.networkConfig, errs[2] = read("network-config", false)
	return s, errors.Join(errs[:]...)
}
