! A Fortran MPI-IO program (`use mpi`): opens FILE, writes a global 2-D
! array of integers collectively through a subarray view (each rank a
! block of columns), reads it back the same way and checks every value and
! the status's count; a second file's Fortran handle is another; close
! gives MPI_FILE_NULL back. Prints "ok fortran" on rank 0 when every rank
! passed; exits non-zero (MPI_Abort) otherwise.
!   fortran FILE
program fortran_io
  use mpi
  implicit none
  integer, parameter :: rows = 64, cols = 16
  integer :: ierr, rank, procs, fh, filetype, i, j, bad, anybad, count
  integer :: sizes(2), subsizes(2), starts(2)
  integer :: status(MPI_STATUS_SIZE)
  integer(kind=MPI_OFFSET_KIND) :: disp, size
  integer :: mine(rows, cols), back(rows, cols)
  character(len=1024) :: name

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, procs, ierr)
  call get_command_argument(1, name)
  bad = 0
  do j = 1, cols
    do i = 1, rows
      mine(i, j) = i * 100000 + rank * cols + j
    end do
  end do
  sizes = (/ rows, cols * procs /)
  subsizes = (/ rows, cols /)
  starts = (/ 0, rank * cols /)
  call MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_FORTRAN, MPI_INTEGER, filetype, ierr)
  call MPI_Type_commit(filetype, ierr)

  call MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE + MPI_MODE_RDWR, MPI_INFO_NULL, fh, ierr)
  call check(ierr, 'MPI_File_open')
  disp = 0
  call MPI_File_set_view(fh, disp, MPI_INTEGER, filetype, 'native', MPI_INFO_NULL, ierr)
  call check(ierr, 'MPI_File_set_view')
  call MPI_File_write_all(fh, mine, rows * cols, MPI_INTEGER, status, ierr)
  call check(ierr, 'MPI_File_write_all')
  call MPI_Get_count(status, MPI_INTEGER, count, ierr)
  if (count /= rows * cols) then
    print '(A,I0,A,I0)', 'rank ', rank, ': write_all status count ', count
    bad = 1
  end if
  call MPI_File_sync(fh, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_File_sync(fh, ierr)
  call MPI_File_get_size(fh, size, ierr)
  call check(ierr, 'MPI_File_get_size')
  if (size /= int(rows, MPI_OFFSET_KIND) * cols * procs * 4) then
    print '(A,I0,A,I0)', 'rank ', rank, ': file size ', size
    bad = 1
  end if

  ! Back through the same view, seeking to its start first.
  back = 0
  call MPI_File_seek(fh, int(0, MPI_OFFSET_KIND), MPI_SEEK_SET, ierr)
  call check(ierr, 'MPI_File_seek')
  call MPI_File_read_all(fh, back, rows * cols, MPI_INTEGER, status, ierr)
  call check(ierr, 'MPI_File_read_all')
  do j = 1, cols
    do i = 1, rows
      if (back(i, j) /= mine(i, j)) then
        if (bad == 0) print '(A,I0,A,I0,A,I0,A,I0)', 'rank ', rank, ': (', i, ',', j, ') read ', back(i, j)
        bad = 1
      end if
    end do
  end do

  call MPI_File_close(fh, ierr)
  call check(ierr, 'MPI_File_close')
  if (fh /= MPI_FILE_NULL) then
    print '(A,I0,A)', 'rank ', rank, ': close did not give MPI_FILE_NULL back'
    bad = 1
  end if
  call MPI_Type_free(filetype, ierr)
  call MPI_Allreduce(bad, anybad, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  if (rank == 0 .and. anybad == 0) print '(A)', 'ok fortran'
  call MPI_Finalize(ierr)
  if (anybad /= 0) stop 1

contains

  subroutine check(code, what)
    integer, intent(in) :: code
    character(len=*), intent(in) :: what
    character(len=MPI_MAX_ERROR_STRING) :: text
    integer :: length, e
    if (code == MPI_SUCCESS) return
    call MPI_Error_string(code, text, length, e)
    print '(A,I0,A,A,A,A)', 'rank ', rank, ': ', what, ': ', text(1:length)
    call MPI_Abort(MPI_COMM_WORLD, 3, e)
  end subroutine check

end program fortran_io
