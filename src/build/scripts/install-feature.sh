# Runs one Feature's install.sh as root, in its staging folder, with the builtin and option
# variables exported (spec: Features, "Installation"). Written by devcell; the two variables
# above this line name the Feature.
set -e
devcell_on_exit() {
    devcell_status=$?
    if [ "$devcell_status" -ne 0 ]; then
        echo "ERROR: Feature \"$devcell_feature_name\" ($devcell_feature_id) failed to install! (exit code $devcell_status)" >&2
    fi
}
trap devcell_on_exit EXIT
echo "devcell: installing Feature \"$devcell_feature_name\" ($devcell_feature_id)"
set -a
. ../devcontainer-features.builtin.env
. ./devcontainer-features.env
set +a
chmod +x ./install.sh
devcell_first_line=
IFS= read -r devcell_first_line < ./install.sh || true
case "$devcell_first_line" in
    '#!'*) ./install.sh ;;
    *) /bin/sh ./install.sh ;;
esac
