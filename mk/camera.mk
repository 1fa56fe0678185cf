# camera: capture, conversion, preprocessing, observation history.
#
#   make test-camera-fuzz   run every camera fuzz target briefly (CI): an
#                           execution-count budget per target (about 10 s
#                           each on the 2-core CI machine), not a time: Go
#                           1.26's coordinator can race its own -fuzztime
#                           deadline on a busy machine and fail with
#                           "context deadline exceeded" and no failing input
#                           (golang/go#75804, fixed in 1.27), a count cannot;
#                           CAMERA_FUZZTIME=10m for a longer run by hand
#   make bench-camera       640x480 YUYV and MJPEG -> 96x96 tensor per frame:
#                           median ms, CPU ms, allocations
#   make camera-fixtures    regenerate the golden fixtures (ffmpeg + the
#                           training toolkit's preprocess_image); commit them

# TARGET:BUDGET; CAMERA_FUZZTIME, when set, replaces every budget.
CAMERA_FUZZ_TARGETS := FuzzYUYV:20000x FuzzJPEG:4000x FuzzSplitMJPEG:40000x FuzzMultipart:10000x
CAMERA_BENCHTIME ?= 200x

.PHONY: test-camera-fuzz bench-camera camera-fixtures
test-camera-fuzz:
	@set -e; for tb in $(CAMERA_FUZZ_TARGETS); do \
	  t=$${tb%%:*}; budget=$${CAMERA_FUZZTIME:-$${tb#*:}}; \
	  echo "fuzz $$t ($$budget)"; \
	  $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $$budget -fuzzminimizetime 100x -parallel 2 ./camera/; \
	done

bench-camera:
	$(GO) test -run '^$$' -bench 'Pipeline|Preprocess640' -benchtime $(CAMERA_BENCHTIME) -count 3 ./camera/

camera-fixtures:
	./camera/testdata/gen_fixtures.sh
	PYTHONPATH=$(CURDIR)/training $(PY) camera/testdata/gen_preprocess_golden.py

EXTRA_TESTS += test-camera-fuzz
EXTRA_BENCH += bench-camera
