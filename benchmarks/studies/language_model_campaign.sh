#!/usr/bin/env bash
# The measurements of the fine-tuned language model (issue 20), for BENCHMARKS.md: the sparse,
# frozen and fine-tuned pipelines side by side on SNIPS and the ten NLU-Evaluation-Data folds, the
# TF-IDF + LinearSVC / CRFsuite baseline on the same splits, then the settings of the fine-tuned
# pipeline one at a time on NLU-Evaluation-Data fold 1.
#
#   benchmarks/studies/language_model_campaign.sh [OUT] [part ...]   parts: side-by-side baseline settings
#
# Run it alone on the machine: every training is timed (whole `nlu-engine train` process), and
# another job on the cores changes the times (not the scores: training is seeded). Results go to
# OUT (default benchmark_results/language_model) as JSON and markdown, one file per run.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.venv/bin}
OUT=${1:-benchmark_results/language_model}
shift || true
PARTS=${*:-side-by-side baseline settings}
mkdir -p "$OUT"

bench() {  # bench NAME TRAINING_CONFIG [--set K=V ...]: one run, its own output folder
    local name=$1 config=$2
    shift 2
    echo "== $name" >&2
    "$BIN/nlu-engine" benchmark "$config" --out "$OUT/$name" "$@"
}

for part in $PARTS; do
    case $part in
    side-by-side)
        # SNIPS test: sparse, frozen, fine-tuned (--keep-models: the archives for the server benchmark)
        for config in snips snips_bert snips_bert_finetuned; do
            bench "$config" "training_configs/$config.yml" --keep-models
        done
        # NLU-Evaluation-Data, ten folds each (mean ± std in the JSON's summary)
        for config in nlu_eval nlu_eval_bert nlu_eval_bert_finetuned; do
            bench "$config" "training_configs/$config.yml"
        done
        ;;
    baseline)
        "$BIN/python" -m benchmarks.studies.baseline training_configs/snips.yml --out "$OUT/baseline"
        "$BIN/python" -m benchmarks.studies.baseline training_configs/nlu_eval.yml --out "$OUT/baseline"
        ;;
    settings)
        # one setting changed at a time from pipelines/diet_bert_finetuned.yml, NLU-Eval fold 1
        kfold1=training_configs/nlu_eval_kfold1_bert_finetuned.yml
        lm=LanguageModelFeaturizer
        bench settings-default "$kfold1"
        bench settings-first-subtoken "$kfold1" --set "$lm.token_pooling=first"
        for rate in 0.00005 0.0002 0.0005; do
            bench "settings-lr-$rate" "$kfold1" --set "$lm.encoder_learning_rate=$rate"
        done
        for layers in 1 4 6 null; do
            bench "settings-layers-$layers" "$kfold1" --set "$lm.trainable_layers=$layers"
        done
        bench settings-layerwise-decay-0.8 "$kfold1" --set "$lm.trainable_layers=6" \
            --set "$lm.layerwise_lr_decay=0.8"
        bench settings-no-encoder-dropout "$kfold1" --set "$lm.encoder_dropout=0"
        # DIET reads only the language model's features (the sparse featurizers still run)
        bench settings-no-sparse "$kfold1" --set "DIETClassifier.featurizers=[LanguageModelFeaturizer_1]"
        bench settings-float32-weights "$kfold1" --set "$lm.weights_dtype=float32"
        ;;
    *)
        echo "unknown part '$part'; parts: side-by-side baseline settings" >&2
        exit 2
        ;;
    esac
done
