# Sourced by the pipeline tests: mpirun for P ranks on this one host
# (oversubscribed: more processes than cores), as root where CI runs.
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (apt-get install openmpi-bin)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# containers often forbid the cross-memory attach shared memory would use
export OMPI_MCA_btl_vader_single_copy_mechanism=none
