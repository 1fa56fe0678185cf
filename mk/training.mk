# training: the Python toolkit (train, export, calibrate EnergyFlow bundles).
#
#   make parity-fixtures       regenerate engines/testdata/parity (tiny bundle +
#                              reference sampler cases for the Go parity test);
#                              commit the result
#   make paper-size-bundle     random-init paper-size bundle (down dims 64/128/256,
#                              T_p=16, D_a=10) in build/bundles/paper-size, seconds
#   make reward-recovery       the reward-recovery experiment (issue #2 item 9;
#                              research/reward/reward_recovery.py), minutes

TRAINING_PY := PYTHONPATH=$(CURDIR)/training $(PY)

.PHONY: parity-fixtures paper-size-bundle reward-recovery
parity-fixtures:
	$(TRAINING_PY) -m energyflow fixtures --out engines/testdata/parity

paper-size-bundle:
	$(TRAINING_PY) -m energyflow export --random-init --paper-size --energy-head pooled --out build/bundles/paper-size

reward-recovery:
	$(TRAINING_PY) -m research.reward.reward_recovery --steps 5000 --threads 1
