"""Public check suites: the contracts a ruler, a kernel or an estimator must keep.

Run them on your own component before you trust an estimate made with it:

    from scarce.testing import check_estimator, check_kernel, check_ruler

    check_ruler(MyRuler())          # raises ContractViolation naming the rule broken, and how
    check_kernel(MyKernel())
    check_estimator(MyEstimator(n_samples=500))

``ruler_checks``, ``kernel_checks`` and ``estimator_checks`` list the same checks one by one
(each a callable with a ``rule`` name), for ``pytest.mark.parametrize``.  The project's own
tests run these suites over every registered ruler, kernel and estimator, in the spirit of
scikit-learn's ``check_estimator`` and emcee's shared move test.
"""

from scarce.testing._base import Check, CheckSkipped, ContractViolation
from scarce.testing.estimators import check_estimator, estimator_checks
from scarce.testing.kernels import check_kernel, kernel_checks
from scarce.testing.rulers import check_ruler, ruler_checks

__all__ = ["Check", "CheckSkipped", "ContractViolation", "check_estimator", "check_kernel", "check_ruler",
           "estimator_checks", "kernel_checks", "ruler_checks"]
