package telemetry

// scaleRGB resizes src (sw×sh) into dst (dw×dh) by nearest neighbour.
func scaleRGB(dst []byte, dw, dh int, src []byte, sw, sh int) {
	for y := 0; y < dh; y++ {
		sy := y * sh / dh
		srow := src[sy*sw*3:]
		drow := dst[y*dw*3 : (y+1)*dw*3]
		for x := 0; x < dw; x++ {
			sx := (x * sw / dw) * 3
			drow[x*3], drow[x*3+1], drow[x*3+2] = srow[sx], srow[sx+1], srow[sx+2]
		}
	}
}
