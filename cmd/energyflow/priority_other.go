//go:build !linux

package main

import "errors"

// setNice is Linux only (the systemd unit's Nice=).
func setNice(int) error { return errors.New("set niceness: supported on Linux only") }
