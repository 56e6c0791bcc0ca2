# The mpirun flags of the dist.* tests: one machine, possibly more ranks than cores, possibly as
# root (CI containers), loopback only. Sourced; sets the array MPIRUN_FLAGS.
MPIRUN_FLAGS=(--oversubscribe --allow-run-as-root --bind-to none
              --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
