#pragma once
/// The process's communicator and facts about MPI support, chosen once per process.
#include <string>

#include "mixprec/dist/communicator.h"

namespace mixprec::dist {

/// The communicator of every rank of this job. When mixprec is built with MPI and the process
/// was started by a launcher (mpirun/mpiexec: OMPI_COMM_WORLD_SIZE; PMIx, e.g. Slurm's
/// `srun --mpi=pmix`: PMIX_RANK; PMI: PMI_SIZE), the first call initialises MPI and MPI is
/// finalised at exit; otherwise it is a SingleProcess, and MPI is never initialised (so a plain
/// `mixprec train` needs no MPI runtime). Throws BackendError if MPI fails to initialise, or if
/// a launcher started the process but mixprec was built without MPI and the job has more than
/// one rank (N copies would otherwise train N separate models, each believing it is alone).
const Communicator& world();

/// Whether this build of mixprec has MPI support (CMake option MIXPREC_MPI).
bool mpi_built_in();

/// The MPI library's own version string (MPI_Get_library_version, e.g. "Open MPI v4.1.4, ..."),
/// first line only; "" when mpi_built_in() is false. Does not initialise MPI.
std::string mpi_library_version();

/// Ends every rank of the job with exit_code (MPI_Abort under MPI, std::exit otherwise). Call it
/// from a program's top-level error handler when a rank fails on its own: returning from main
/// would finalise MPI, which waits for peers that may be blocked in a collective waiting for
/// this rank. Never returns.
[[noreturn]] void abort_job(int exit_code);

/// For a program's top-level handler of an error that this rank may have seen alone (anything
/// but AgreedError, which every rank throws together): if world() is a communicator of several
/// ranks, prints nothing and ends the whole job at once through abort_job(exit_code), because
/// the other ranks may be waiting for this one in a collective and would otherwise wait until
/// the exit timeout (MIXPREC_DIST_EXIT_TIMEOUT) lets the launcher end the job. Returns, doing
/// nothing, in a single process and before world() was first called (MPI not initialised: the
/// launcher ends the job when this process exits with a non-zero status).
void abort_job_if_distributed(int exit_code);

}  // namespace mixprec::dist
