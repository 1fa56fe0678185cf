package modbustest

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// OpenPTY opens a pseudo-terminal pair. The caller serves on master and
// opens slavePath as a serial device (it may be opened and closed again);
// closing master ends it.
func OpenPTY() (master *os.File, slavePath string, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, "", fmt.Errorf("modbustest: open /dev/ptmx: %w", err)
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(fd)
		return nil, "", fmt.Errorf("modbustest: unlock pty: %w", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		unix.Close(fd)
		return nil, "", fmt.Errorf("modbustest: pty number: %w", err)
	}
	// Raw mode on the master side so that no byte is translated.
	if t, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
		t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
		t.Oflag &^= unix.OPOST
		t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
		t.Cflag &^= unix.CSIZE | unix.PARENB
		t.Cflag |= unix.CS8
		_ = unix.IoctlSetTermios(fd, unix.TCSETS, t)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), fmt.Sprintf("/dev/pts/%d", n), nil
}
