/* ring: a token goes around the ranks twice, each adding its rank; rank 0
   prints the total, which must be 2 * size*(size-1)/2. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
    int rank, size;
    long token = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (int lap = 0; lap < 2; lap++) {
        if (rank == 0 && size > 1) {
            MPI_Send(&token, 1, MPI_LONG, next, 0, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_LONG, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (size > 1) {
            MPI_Recv(&token, 1, MPI_LONG, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            token += rank;
            MPI_Send(&token, 1, MPI_LONG, next, 0, MPI_COMM_WORLD);
        }
    }
    if (rank == 0)
        printf("ring: size %d token %ld expected %ld\n", size, token, 2L * size * (size - 1) / 2);
    MPI_Finalize();
    return rank == 0 && token != 2L * size * (size - 1) / 2;
}
