#!/usr/bin/env bash
# Regenerates the camera golden fixtures. Run once by hand (needs ffmpeg and
# python3); the outputs are committed. Not run by CI.
#
#   testsrc2_320x240.yuyv          one raw YUYV 4:2:2 frame (ffmpeg testsrc2)
#   testsrc2_320x240_yuyv_ref.png  ffmpeg's RGB of it (BT.601 limited range)
#   testsrc2_320x240.jpg           the same picture as a 4:2:2 JPEG (like UVC MJPEG)
#   testsrc2_320x240_nohuff.jpg    that JPEG with its DHT segment removed
#   testsrc2_320x240_jpg_ref.png   ffmpeg's RGB decode of the JPEG
#   testsrc2_640x480.jpg           benchmark input (4:2:2 JPEG, as UVC MJPEG)
#   clip_160x120.mjpeg / .yuyv     3-frame recordings for the replay source
#   frames/000{0,1,2}.jpg          3-frame image directory for the replay source
#   preprocess_*.f32 + .json       see gen_preprocess_golden.py
set -euo pipefail
cd "$(dirname "$0")"
ff="ffmpeg -hide_banner -loglevel error -y"
src="testsrc2=size=320x240:rate=10"
$ff -f lavfi -i "$src" -frames:v 1 -pix_fmt yuyv422 -f rawvideo testsrc2_320x240.yuyv
# Reference RGB: BT.601 limited range, chroma of each pixel pair shared
# (point sampling), exact rounding.
$ff -f rawvideo -pix_fmt yuyv422 -s 320x240 -i testsrc2_320x240.yuyv \
  -sws_flags neighbor+accurate_rnd+full_chroma_int -pix_fmt rgb24 testsrc2_320x240_yuyv_ref.png
$ff -f lavfi -i "$src" -frames:v 1 -pix_fmt yuvj422p -q:v 3 -huffman default -f mjpeg testsrc2_320x240.jpg
$ff -i testsrc2_320x240.jpg -sws_flags neighbor+accurate_rnd+full_chroma_int -pix_fmt rgb24 testsrc2_320x240_jpg_ref.png
python3 - <<'PY'
# Strip every DHT (0xFFC4) segment before SOS, as many UVC cameras send.
b = open("testsrc2_320x240.jpg", "rb").read()
out, i = bytearray(b[:2]), 2
while True:
    assert b[i] == 0xFF
    m = b[i + 1]
    if m == 0xDA:
        out += b[i:]
        break
    n = (b[i + 2] << 8) | b[i + 3]
    if m != 0xC4:
        out += b[i:i + 2 + n]
    i += 2 + n
open("testsrc2_320x240_nohuff.jpg", "wb").write(bytes(out))
PY
# 640x480 4:2:2 JPEG for the benchmark (typical UVC MJPEG frame).
$ff -f lavfi -i "testsrc2=size=640x480:rate=10" -frames:v 1 -pix_fmt yuvj422p -q:v 5 -huffman default -f mjpeg testsrc2_640x480.jpg
small="testsrc2=size=160x120:rate=10"
$ff -f lavfi -i "$small" -frames:v 3 -pix_fmt yuvj422p -q:v 5 -huffman default -f mjpeg clip_160x120.mjpeg
$ff -f lavfi -i "$small" -frames:v 3 -pix_fmt yuyv422 -f rawvideo clip_160x120.yuyv
mkdir -p frames
$ff -f lavfi -i "$small" -frames:v 3 -pix_fmt yuvj420p -q:v 5 -huffman default frames/%04d.jpg
ls -l
