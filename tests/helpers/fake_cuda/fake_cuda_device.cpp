// A CUDA device that exists only for FakeTensorMode, on a CPU-only build of torch.
//
// FakeTensorMode makes tensors with a device and no storage, but a CPU build still refuses
// `cuda` wherever C++ asks the device for something: a device guard (Tensor.to, indexing,
// copy_), and the autograd engine, which records each CUDA input's stream and asks the
// current accelerator for its own. Two things make both answer:
//   * a device-guard implementation for CUDA: c10's FakeGuardImpl (made for such tests), put
//     in the registry slot the CPU build leaves empty;
//   * CUDA hooks that report one device: torch created its hooks object (the CPU build's
//     stub, a plain CUDAHooksInterface) before any extension could register another, so the
//     stub is given the vtable of a subclass. The subclass adds no data member: only the
//     virtual calls change. Valid for the pinned torch (2.13.0); the Python side checks the
//     result (the hooks' hasCUDA(), what at::hasCUDA() asks) and fails loudly when it does not
//     hold.
// Process-wide and irreversible: load it only in a process of its own.
//
// A plain C function loaded with ctypes, and only the headers it needs (no pybind11, no
// ATen/Context.h): the first use in a session compiles it in ~1.5 CPU seconds, not ~7.
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/FakeGuardImpl.h>

#include <cstring>

namespace {

c10::impl::FakeGuardImpl<c10::DeviceType::CUDA> fake_cuda_guard;

struct OneFakeCudaDevice : at::CUDAHooksInterface {
  bool hasCUDA() const override { return true; }
  bool isAvailable() const override { return true; }
  bool isBuilt() const override { return true; }
  c10::DeviceIndex deviceCount() const override { return 1; }
  c10::DeviceIndex getCurrentDevice() const override { return 0; }
  c10::DeviceIndex current_device() const override { return 0; }
  int getNumGPUs() const override { return 1; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  void init() const override {}
};

}  // namespace

// Make this CPU build accept fake CUDA tensors; returns whether the hooks now report CUDA.
extern "C" bool install_fake_cuda_device() {
  auto& slot = c10::impl::device_guard_impl_registry[static_cast<size_t>(c10::DeviceType::CUDA)];
  if (slot.load() == nullptr) {
    slot.store(&fake_cuda_guard);
  }
  const at::CUDAHooksInterface& hooks = at::detail::getCUDAHooks();
  if (!hooks.hasCUDA()) {
    static OneFakeCudaDevice one_device;
    std::memcpy(const_cast<void*>(static_cast<const void*>(&hooks)),
                static_cast<const void*>(&one_device), sizeof(void*));
  }
  return at::detail::getCUDAHooks().hasCUDA();
}
