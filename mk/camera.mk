# camera: capture, conversion, preprocessing, observation history.
#
#   make test-camera-fuzz   run every camera fuzz target briefly (CI);
#                           CAMERA_FUZZTIME=10m for a longer run by hand
#   make bench-camera       640x480 YUYV and MJPEG -> 96x96 tensor per frame:
#                           median ms, CPU ms, allocations
#   make camera-fixtures    regenerate the golden fixtures (ffmpeg + the
#                           training toolkit's preprocess_image); commit them

CAMERA_FUZZTIME ?= 10s
CAMERA_FUZZ_TARGETS := FuzzYUYV FuzzJPEG FuzzSplitMJPEG FuzzMultipart
CAMERA_BENCHTIME ?= 200x

.PHONY: test-camera-fuzz bench-camera camera-fixtures
test-camera-fuzz:
	@set -e; for t in $(CAMERA_FUZZ_TARGETS); do \
	  echo "fuzz $$t ($(CAMERA_FUZZTIME))"; \
	  $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(CAMERA_FUZZTIME) -fuzzminimizetime 1s -parallel 2 ./camera/; \
	done

bench-camera:
	$(GO) test -run '^$$' -bench 'Pipeline|Preprocess640' -benchtime $(CAMERA_BENCHTIME) -count 3 ./camera/

camera-fixtures:
	./camera/testdata/gen_fixtures.sh
	$(PY) camera/testdata/gen_preprocess_golden.py

EXTRA_TESTS += test-camera-fuzz
EXTRA_BENCH += bench-camera
